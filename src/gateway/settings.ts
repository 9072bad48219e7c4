// The gateway's settings as one immutable snapshot, derived from a config by one pure function (start and reload).
import type { BudgetSettings } from "../admission/token-budgets.js";
import type { QueueSettings } from "../admission/backend-slots.js";
import type { AttainedServiceSettings } from "../admission/flow-queue/attained-service.js";
import { attainedServiceSettingsOf, queueSettingsOf } from "../admission/queue-settings.js";
import type { ResponseOwnerSettings } from "../affinity/response-owners.js";
import type { SessionlessMode } from "../affinity/decide.js";
import type { LoadPollSettings } from "../backends/engine-load-poller.js";
import type { ProbeSettings } from "../backends/health-checker.js";
import type { HealthThresholds } from "../backends/health-state.js";
import type { GatewayConfig } from "../config/schema.js";
import { resolveTierSettings, type TierRouterSettings } from "../routing/tier-router.js";
import type { AdaptationSettings } from "./adaptation/responses-tools.js";
import type { ApiKeyEntry } from "./client-auth.js";
import type { PoolSettings } from "./upstream-pools.js";

/** What the scheduler takes from a config (its balancer and policy are built from `config.affinity` by the wiring). */
export interface SchedulerData {
  readonly stickyTtlSeconds: number;
  readonly rebalanceOnRecovery: boolean;
  readonly loadFactor: number;
  readonly sessionless: SessionlessMode;
  /** Engine readings older than this are not placed by (0: no engine readings are polled). */
  readonly engineSignalMaxAgeMs: number;
}

/** Settings derived once per config (load or reload), in the units the code uses; never changed in place. */
export interface GatewaySettings {
  readonly config: GatewayConfig;
  readonly tiers: TierRouterSettings;
  readonly maxBodyBytes: number;
  readonly maxAttempts: number;
  readonly firstByteTimeoutMs: number;
  /** The first-byte timeout of streaming requests (their first chunk comes after prefill only). */
  readonly streamFirstByteTimeoutMs: number;
  /** A streaming attempt without response headers after this long fails over (upstream.stream_headers_timeout_seconds). */
  readonly streamHeadersTimeoutMs: number;
  /** A non-streaming answer is refused past this many bytes. */
  readonly maxResponseBytes: number;
  readonly requestTimeoutMs: number;
  readonly adminToken: string | undefined;
  /** Client API keys by the hex SHA-256 of the key. */
  readonly apiKeys: ReadonlyMap<string, ApiKeyEntry>;
  /** What the gateway changes in requests a stock engine would refuse (config `adaptation`). */
  readonly adaptation: AdaptationSettings;
  readonly scheduler: SchedulerData;
  readonly probe: ProbeSettings;
  readonly loadPoll: LoadPollSettings;
  readonly thresholds: HealthThresholds;
  /** The slot queue's and the flow scheduler's (admission.scheduling). */
  readonly queue: QueueSettings;
  /** How the flows' attained service decays and how many flows it keeps. */
  readonly attainedService: AttainedServiceSettings;
  readonly responseOwners: ResponseOwnerSettings;
  readonly budgets: BudgetSettings;
  readonly pools: PoolSettings;
  /** The client timeouts in whole milliseconds, as node's server wants them. */
  readonly clientTimeouts: { readonly headersMs: number; readonly receiveMs: number };
}

/**
 * The snapshot of `config`. `tiers` are the tiers the registry holds (the config's backends plus discovered
 * ones), which the tier router's defaults depend on. Pure: same inputs, same settings.
 */
export function settingsFrom(config: GatewayConfig, tiers: readonly string[]): GatewaySettings {
  const { affinity, health, upstream, server, admission } = config;
  const engineIntervalMs = health.engine_metrics_interval_seconds * 1000;
  return {
    config,
    tiers: resolveTierSettings(config.routing, tiers),
    maxBodyBytes: server.max_body_bytes,
    maxAttempts: upstream.max_attempts,
    firstByteTimeoutMs: upstream.first_byte_timeout_seconds * 1000,
    streamFirstByteTimeoutMs: upstream.stream_first_byte_timeout_seconds * 1000,
    streamHeadersTimeoutMs: upstream.stream_headers_timeout_seconds * 1000,
    maxResponseBytes: upstream.max_response_bytes,
    requestTimeoutMs: upstream.request_timeout_seconds * 1000,
    adminToken: server.admin_token,
    apiKeys: new Map(
      server.api_keys.map((key) => [key.sha256, { agentId: key.agent_id, maxPriority: key.max_priority }]),
    ),
    adaptation: {
      flattenNamespaces: config.adaptation.flatten_namespaces,
      dropHostedTools: config.adaptation.drop_hosted_tools,
      foldSystemMessages: config.adaptation.fold_system_messages,
      dropBillingHeader: config.adaptation.drop_billing_header,
    },
    scheduler: {
      stickyTtlSeconds: affinity.sticky_ttl_seconds,
      rebalanceOnRecovery: affinity.rebalance_on_backend_recovery,
      loadFactor: affinity.load_factor,
      sessionless: affinity.sessionless,
      // Three missed readings and an engine's own load is too old to place by.
      engineSignalMaxAgeMs: engineIntervalMs > 0 ? 3 * engineIntervalMs : 0,
    },
    probe: {
      intervalMs: health.probe_interval_seconds * 1000,
      timeoutMs: health.probe_timeout_seconds * 1000,
    },
    loadPoll: { intervalMs: engineIntervalMs, timeoutMs: health.probe_timeout_seconds * 1000 },
    thresholds: {
      failuresToMarkDown: health.failures_to_mark_down,
      successesToMarkUp: health.successes_to_mark_up,
      ejection: {
        consecutiveFailures: health.ejection_consecutive_failures,
        baseMs: health.ejection_base_seconds * 1000,
        maxMs: Math.max(health.ejection_max_seconds, health.ejection_base_seconds) * 1000,
        stallMs: engineIntervalMs > 0 ? health.stall_seconds * 1000 : 0,
      },
    },
    queue: queueSettingsOf(config),
    attainedService: attainedServiceSettingsOf(config),
    responseOwners: { ttlMs: config.responses.ttl_seconds * 1000, maxEntries: config.responses.max_entries },
    budgets: {
      windowMs: admission.budget_window_seconds * 1000,
      defaultBudget: admission.default_token_budget,
      overrides: new Map(
        Object.entries(admission.agents).map(([agent, entry]) => [agent, entry.token_budget]),
      ),
      maxAgents: admission.max_agents,
    },
    pools: {
      connectTimeoutMs: upstream.connect_timeout_seconds * 1000,
      connections: upstream.keep_alive_connections,
      idleTimeoutMs: upstream.idle_connection_timeout_seconds * 1000,
    },
    clientTimeouts: clientTimeoutsMs(server),
  };
}

/** The client timeouts in whole milliseconds, as node's server wants them (2.01 s is 2009.999... ms in floats). */
export function clientTimeoutsMs(server: {
  headers_timeout_seconds: number;
  receive_timeout_seconds: number;
}): { headersMs: number; receiveMs: number } {
  const headersMs = Math.max(1, Math.round(server.headers_timeout_seconds * 1000));
  return { headersMs, receiveMs: Math.max(headersMs, Math.round(server.receive_timeout_seconds * 1000)) };
}
