// A config reload as a checked table: each part of a running gateway is configured from the new settings by one
// step that names the config keys it applies; the keys no step can apply are listed as restart-only. A test walks
// every key of the config schema and asserts it is one or the other (test/gateway/reload-table.test.ts), and
// docs/configuration.md lists the same restart-only set.
import type { Server } from "node:http";
import type { BudgetStore } from "../admission/budget-store.js";
import { TokenBudgets } from "../admission/token-budgets.js";
import type { EngineLoadPoller } from "../backends/engine-load-poller.js";
import type { HealthChecker } from "../backends/health-checker.js";
import type { BackendConfig, GatewayConfig } from "../config/schema.js";
import type { Random } from "../core/random.js";
import type { ConnectionGuard } from "./connection-guard.js";
import { liveStateFrom } from "./live-state.js";
import type { GatewayParts, LiveState } from "./runtime.js";
import { settingsFrom, type GatewaySettings } from "./settings.js";
import { schedulerSettingsOf } from "./wiring.js";

export interface ReloadTarget {
  readonly parts: Omit<GatewayParts, "live">;
  readonly live: LiveState;
  readonly health: HealthChecker;
  readonly loadPoller: EngineLoadPoller;
  readonly connections: ConnectionGuard;
  /** The API's server: node reads its client timeouts per connection check. */
  readonly server: Server;
  readonly random: Random;
  /** server.max_connections, or the default the open-file limit allows. */
  maxConnections(settings: GatewaySettings): number;
  /** The engines discovery holds now (the new settings' backends add them to the config's). */
  discovered(): readonly BackendConfig[];
  /** Makes the registry hold the new settings' backends; what changed. */
  applyBackends(settings: GatewaySettings): string[];
  /** Points discovery at the new config's entries. */
  configureDiscovery(config: GatewayConfig): void;
}

/** What a step sees: the target, the new settings, the old ones, and where to say what it changed. */
interface StepContext {
  readonly target: ReloadTarget;
  readonly settings: GatewaySettings;
  readonly before: GatewaySettings;
  readonly changed: string[];
  /** The budgets of the new snapshot (a step may replace them). */
  budgets: BudgetStore;
}

/** One part a reload configures, and the config keys (each with everything under it) that it applies. */
export interface ReloadStep {
  readonly part: string;
  readonly keys: readonly string[];
  apply(context: StepContext): void;
}

/** The steps, in order: the backends first (the new settings' tiers are theirs). */
export const RELOAD_STEPS: readonly ReloadStep[] = [
  {
    part: "registry and discovery",
    keys: [
      "backends",
      "discovery",
      "health.failures_to_mark_down",
      "health.successes_to_mark_up",
      "health.ejection_consecutive_failures",
      "health.ejection_base_seconds",
      "health.ejection_max_seconds",
      "health.stall_seconds",
    ],
    apply: ({ target, settings, changed }) => {
      changed.push(...target.applyBackends(settings));
      target.configureDiscovery(settings.config);
    },
  },
  {
    part: "placement service and binding store",
    keys: [
      "affinity.sticky_ttl_seconds",
      "affinity.rebalance_on_backend_recovery",
      "affinity.balancer",
      "affinity.load_factor",
      "affinity.sessionless",
      "affinity.policy",
      "affinity.sglang",
      "affinity.llmd",
      "affinity.kv_events.move_min_tokens",
      "affinity.kv_events.prefill_context_weight",
      // The staleness bound of engine readings (three intervals), with the poller below.
      "health.engine_metrics_interval_seconds",
    ],
    apply: ({ target, settings }) => {
      target.parts.scheduler.configure(schedulerSettingsOf(settings, target.random));
      target.parts.bindings.configure(settings.scheduler.stickyTtlMs);
      target.loadPoller.configure(settings.loadPoll);
    },
  },
  {
    part: "slots and flow scheduler",
    keys: [
      "admission.max_queue_size",
      "admission.queue_timeout_seconds",
      "admission.max_inflight_per_agent",
      "admission.scheduling.policy",
      "admission.scheduling.bands",
      "admission.scheduling.half_life_seconds",
      "admission.scheduling.max_flows",
      "admission.scheduling.metrics_top_flows",
    ],
    apply: ({ target, settings }) => {
      const { slots, metrics, registry } = target.parts;
      slots.configure(settings.queue);
      slots.service.configure(settings.attainedService);
      metrics.flows.attach(slots, settings.metricsTopFlows);
      for (const backend of registry.all()) slots.pump(backend);
    },
  },
  {
    part: "health probes",
    keys: ["health.probe_interval_seconds", "health.probe_timeout_seconds"],
    apply: ({ target, settings }) => target.health.configure(settings.probe),
  },
  {
    part: "response owners",
    keys: ["responses.ttl_seconds", "responses.max_entries"],
    apply: ({ target, settings }) => target.parts.responseOwners.configure(settings.responseOwners),
  },
  {
    part: "upstream pools",
    keys: [
      "upstream.connect_timeout_seconds",
      "upstream.keep_alive_connections",
      "upstream.idle_connection_timeout_seconds",
    ],
    apply: ({ target, settings }) => target.parts.pools.configure(settings.pools),
  },
  {
    part: "token budgets",
    keys: [
      "admission.default_token_budget",
      "admission.budget_window_seconds",
      "admission.agents",
      "admission.max_agents",
    ],
    apply: (context) => {
      const { settings, before, changed } = context;
      if (context.budgets.accepts(settings.budgets)) {
        context.budgets.configure(settings.budgets);
      } else if (before.stores.budgets.kind === "memory") {
        context.budgets = new TokenBudgets(settings.budgets);
        changed.push("budget window or max_agents changed: budget usage starts afresh");
      } else {
        context.budgets.configure(settings.budgets);
        changed.push("budget window changed: shared usage is read in the new window's buckets");
      }
    },
  },
  {
    part: "client connections",
    keys: ["server.max_connections", "server.headers_timeout_seconds", "server.receive_timeout_seconds"],
    apply: ({ target, settings }) => {
      target.connections.setLimit(target.maxConnections(settings));
      // Node reads these per connection check, so new values apply to the requests being received too.
      target.server.headersTimeout = settings.clientTimeouts.headersMs;
      target.server.requestTimeout = settings.clientTimeouts.receiveMs;
    },
  },
  {
    // Read from the live snapshot by each request (or, for the grace, by the shutdown), so the swap applies them.
    part: "live snapshot",
    keys: [
      "server.admin_token",
      "server.max_body_bytes",
      "server.api_keys",
      "server.log_prompts",
      "server.shutdown_grace_seconds",
      "admission.budget_anonymous",
      "admission.scheduling.default_band",
      "admission.scheduling.max_header_priority",
      "admission.scheduling.agents",
      "routing",
      "affinity.session_keys",
      "affinity.receipts.enabled",
      "affinity.receipts.block_tokens",
      "upstream.first_byte_timeout_seconds",
      "upstream.stream_first_byte_timeout_seconds",
      "upstream.stream_headers_timeout_seconds",
      "upstream.max_response_bytes",
      "upstream.request_timeout_seconds",
      "upstream.max_attempts",
      "upstream.drain_seconds",
      "upstream.stream_stall_seconds",
      "upstream.stream_continuation",
      "adaptation",
    ],
    apply: ({ target }) => target.parts.metrics.initTiers(target.parts.registry.tiers()),
  },
];

/** Keys a running gateway cannot apply: a reload that changes one says so, and it applies at the next start. */
export const RESTART_ONLY: readonly { readonly key: string; readonly why: string }[] = [
  { key: "server.host", why: "the API's socket is bound at start" },
  { key: "server.port", why: "the API's socket is bound at start" },
  { key: "server.admin_host", why: "the admin socket is bound at start" },
  { key: "server.admin_port", why: "the admin socket is bound at start" },
  { key: "server.tracing", why: "the tracer and its exporter are made with the server" },
  { key: "server.log_format", why: "the logger is made at start" },
  { key: "server.allow_open", why: "an open host is refused or allowed once, at start" },
  { key: "affinity.store", why: "the binding store's connections are made at start" },
  { key: "admission.store", why: "the budget store's connections are made at start" },
  { key: "admission.scheduling.sync_interval_ms", why: "the shared attained service is made at start" },
  { key: "affinity.max_bindings", why: "the sticky table and receipt memory are sized at start" },
  { key: "affinity.receipts.ttl_seconds", why: "the receipt memory is made at start" },
  {
    key: "affinity.kv_events.replay_timeout_seconds",
    why: "the KV-event subscribers' view is made at start",
  },
];

/** The value at a dotted path of a config (undefined past a missing section). */
function valueAt(config: GatewayConfig, key: string): unknown {
  let value: unknown = config;
  for (const part of key.split(".")) value = (value as Record<string, unknown> | undefined)?.[part];
  return value;
}

/** The config's top-level sections whose value differs between two configs. */
function changedSections(before: GatewayConfig, after: GatewayConfig): string[] {
  return (Object.keys(after) as (keyof GatewayConfig)[]).filter(
    (key) => JSON.stringify(before[key]) !== JSON.stringify(after[key]),
  );
}

/**
 * Applies `config` (environment checked already) to a running gateway. Returns the new live snapshot (undefined
 * when nothing changed) and what changed, including what takes effect only at the next restart.
 */
export function reloadGateway(
  target: ReloadTarget,
  config: GatewayConfig,
): { changed: string[]; live: LiveState | undefined } {
  const before = target.live.settings;
  const sections = changedSections(before.config, config);
  if (sections.length === 0) return { changed: [], live: undefined };
  const settings = settingsFrom(config, target.discovered());
  const context: StepContext = { target, settings, before, changed: [], budgets: target.live.budgets };
  for (const step of RELOAD_STEPS) step.apply(context);
  const { changed } = context;
  for (const { key } of RESTART_ONLY) {
    if (JSON.stringify(valueAt(before.config, key)) !== JSON.stringify(valueAt(config, key)))
      changed.push(`${key} changed: takes effect at the next restart`);
  }
  changed.push(`changed: ${sections.join(", ")}`);
  // A fresh classifier (verdict cache) too: a reload may change the tiers, the model asked or its prompt.
  return { changed, live: liveStateFrom(settings, context.budgets, target.parts) };
}
