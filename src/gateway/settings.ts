// The gateway's settings as one immutable snapshot, derived from a config by one pure function (start, reload and
// discovery changes): nothing outside this file reads the config itself (test/gateway/settings.test.ts checks).
import type { BudgetSettings } from "../admission/token-budgets.js";
import type { QueueSettings } from "../admission/backend-slots.js";
import type { AttainedServiceSettings } from "../admission/flow-queue/attained-service.js";
import { attainedServiceSettingsOf, queueSettingsOf } from "../admission/queue-settings.js";
import type { ResponseOwnerSettings } from "../affinity/response-owners.js";
import type { SessionlessMode } from "../affinity/decide.js";
import type { LoadPollSettings } from "../backends/engine-load-poller.js";
import type { ProbeSettings } from "../backends/health-checker.js";
import type { HealthThresholds } from "../backends/health-state.js";
import type { BalancerName } from "../affinity/balancers.js";
import type { PolicyConfig } from "../affinity/policies/create-policy.js";
import type { BackendConfig, GatewayConfig, SessionKeyConfig, StoreConfig } from "../config/schema.js";
import { resolveTierSettings, type TierRouterSettings } from "../routing/tier-router.js";
import type { AdaptationSettings } from "./adaptation/responses-tools.js";
import type { ApiKeyEntry } from "./client-auth.js";
import type { PoolSettings } from "./upstream-pools.js";
import type { ContinuationSettings } from "./continuation/eligibility.js";

/** What the scheduler takes from a config (its balancer and policy are built from `config.affinity` by the wiring). */
export interface SchedulerData {
  /** affinity.sticky_ttl_seconds in ms (0: affinity off). */
  readonly stickyTtlMs: number;
  readonly rebalanceOnRecovery: boolean;
  readonly loadFactor: number;
  readonly sessionless: SessionlessMode;
  /** Engine readings older than this are not placed by (0: no engine readings are polled). */
  readonly engineSignalMaxAgeMs: number;
  /** The balancer and placement policy the wiring builds (with the gateway's random source). */
  readonly balancer: BalancerName;
  readonly policy: PolicyConfig;
  /** A bound session moves to an engine holding at least this many more of its prompt's tokens (KV events). */
  readonly kvMoveMinTokens: number;
  /** affinity.kv_events.prefill_context_weight (src/affinity/placement/score-kv-cost.ts). */
  readonly kvPrefillContextWeight: number;
}

/** Settings derived once per config (load or reload), in the units the code uses; never changed in place. */
export interface GatewaySettings {
  /** The config these settings were derived from: read only here and by the reload's comparison. */
  readonly config: GatewayConfig;
  /** The config's backends, then the discovered ones the config does not name (the registry's order). */
  readonly backends: readonly BackendConfig[];
  /** Which of `backends` came from discovery. */
  readonly discoveredIds: ReadonlySet<string>;
  readonly tiers: TierRouterSettings;
  readonly maxBodyBytes: number;
  readonly maxAttempts: number;
  readonly firstByteTimeoutMs: number;
  /** A removed engine's in-flight requests finish within this before its pool is cut (upstream.drain_seconds). */
  readonly drainMs: number;
  /** The first-byte timeout of streaming requests (their first chunk comes after prefill only). */
  readonly streamFirstByteTimeoutMs: number;
  /** A streaming attempt without response headers after this long fails over (upstream.stream_headers_timeout_seconds). */
  readonly streamHeadersTimeoutMs: number;
  /** A non-streaming answer is refused past this many bytes. */
  readonly maxResponseBytes: number;
  /** A stream silent this long after its first byte is broken (upstream.stream_stall_seconds; 0: never). */
  readonly streamStallTimeoutMs: number;
  /** Which broken streams are continued on another engine (upstream.stream_continuation). */
  readonly continuation: ContinuationSettings;
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
  /** server.max_connections, when set (else the gateway derives one from the open-file limit). */
  readonly maxConnections: number | undefined;
  readonly shutdownGraceMs: number;
  /** server.log_prompts: the last message on the request's log line. */
  readonly logPrompts: boolean;
  /** Requests without an agent id are charged to a shared anonymous budget (admission.budget_anonymous). */
  readonly budgetAnonymous: boolean;
  /** The admission section, as flow tickets read it (bands, agents, header priority). */
  readonly admission: GatewayConfig["admission"];
  /** Where a request's session id is read, in order (affinity.session_keys). */
  readonly sessionKeys: readonly SessionKeyConfig[];
  readonly receipts: { readonly enabled: boolean; readonly blockTokens: number; readonly ttlMs: number };
  /** The LLM tier classifier's config (routing.classifier), with its verdict cache's TTL resolved. */
  readonly classifier: GatewayConfig["routing"]["classifier"] & { readonly cacheTtlMs: number };
  /** Flows shown by name on /metrics (admission.scheduling.metrics_top_flows). */
  readonly metricsTopFlows: number;
  /** affinity.max_bindings: the sticky table's capacity. */
  readonly maxBindings: number;
  readonly stores: { readonly bindings: StoreConfig; readonly budgets: StoreConfig };
  readonly tracing: GatewayConfig["server"]["tracing"];
  readonly listen: {
    readonly host: string;
    readonly port: number;
    readonly adminHost: string | undefined;
    readonly adminPort: number | undefined;
  };
}

/**
 * The snapshot of `config` with the engines discovery found (those the config names itself are its own). The
 * tier router's defaults depend on the tiers of all of them. Pure: same inputs, same settings.
 */
export function settingsFrom(
  config: GatewayConfig,
  discovered: readonly BackendConfig[] = [],
): GatewaySettings {
  const { affinity, health, upstream, server, admission, routing } = config;
  const engineIntervalMs = health.engine_metrics_interval_seconds * 1000;
  const named = new Set(config.backends.map((b) => b.id));
  const found = discovered.filter((b) => !named.has(b.id));
  const backends = found.length === 0 ? config.backends : [...config.backends, ...found];
  return {
    config,
    backends,
    discoveredIds: new Set(found.map((b) => b.id)),
    tiers: resolveTierSettings(routing, tiersOf(backends)),
    maxBodyBytes: server.max_body_bytes,
    maxAttempts: upstream.max_attempts,
    firstByteTimeoutMs: upstream.first_byte_timeout_seconds * 1000,
    drainMs: upstream.drain_seconds * 1000,
    streamFirstByteTimeoutMs: upstream.stream_first_byte_timeout_seconds * 1000,
    streamHeadersTimeoutMs: upstream.stream_headers_timeout_seconds * 1000,
    maxResponseBytes: upstream.max_response_bytes,
    streamStallTimeoutMs: upstream.stream_stall_seconds * 1000,
    continuation: {
      enabled: upstream.stream_continuation.enabled,
      maxContinuations: upstream.stream_continuation.max_continuations,
      exceptTiers: new Set(upstream.stream_continuation.except_tiers),
    },
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
      stickyTtlMs: affinity.sticky_ttl_seconds * 1000,
      rebalanceOnRecovery: affinity.rebalance_on_backend_recovery,
      loadFactor: affinity.load_factor,
      sessionless: affinity.sessionless,
      // Three missed readings and an engine's own load is too old to place by.
      engineSignalMaxAgeMs: engineIntervalMs > 0 ? 3 * engineIntervalMs : 0,
      balancer: affinity.balancer,
      policy: affinity,
      kvMoveMinTokens: affinity.kv_events.move_min_tokens,
      kvPrefillContextWeight: affinity.kv_events.prefill_context_weight,
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
    maxConnections: server.max_connections,
    shutdownGraceMs: server.shutdown_grace_seconds * 1000,
    logPrompts: server.log_prompts,
    budgetAnonymous: admission.budget_anonymous,
    admission,
    sessionKeys: affinity.session_keys,
    receipts: {
      enabled: affinity.receipts.enabled,
      blockTokens: affinity.receipts.block_tokens,
      ttlMs: affinity.receipts.ttl_seconds * 1000,
    },
    classifier: {
      ...routing.classifier,
      cacheTtlMs: (routing.classifier.cache_ttl_seconds ?? routing.classifier_cache_ttl_seconds) * 1000,
    },
    metricsTopFlows: admission.scheduling.metrics_top_flows,
    maxBindings: affinity.max_bindings,
    stores: { bindings: affinity.store, budgets: admission.store },
    tracing: server.tracing,
    listen: {
      host: server.host,
      port: server.port,
      adminHost: server.admin_host,
      adminPort: server.admin_port,
    },
  };
}

/** The tiers of `backends`, in the order they first appear (the registry's). */
function tiersOf(backends: readonly BackendConfig[]): string[] {
  return [...new Set(backends.map((b) => b.tier))];
}

/** The client timeouts in whole milliseconds, as node's server wants them (2.01 s is 2009.999... ms in floats). */
export function clientTimeoutsMs(server: {
  headers_timeout_seconds: number;
  receive_timeout_seconds: number;
}): { headersMs: number; receiveMs: number } {
  const headersMs = Math.max(1, Math.round(server.headers_timeout_seconds * 1000));
  return { headersMs, receiveMs: Math.max(headersMs, Math.round(server.receive_timeout_seconds * 1000)) };
}
