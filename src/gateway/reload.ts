// A config reload: the new settings snapshot, each service configured from it, and what changed (for the log).
import type { Server } from "node:http";
import { TokenBudgets } from "../admission/token-budgets.js";
import type { EngineLoadPoller } from "../backends/engine-load-poller.js";
import type { HealthChecker } from "../backends/health-checker.js";
import type { GatewayConfig } from "../config/schema.js";
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
  /** Makes the registry hold the new config's backends (and the discovered ones); what changed. */
  applyBackends(settings: GatewaySettings): string[];
  /** Points discovery at the new config's entries. */
  configureDiscovery(config: GatewayConfig): void;
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
  const { parts, live } = target;
  const before = live.settings.config;
  const sections = changedSections(before, config);
  if (sections.length === 0) return { changed: [], live: undefined };
  // The backends first: the tier router's defaults depend on the tiers the registry then holds.
  const changed = target.applyBackends(settingsFrom(config, parts.registry.tiers()));
  const settings = settingsFrom(config, parts.registry.tiers());
  target.configureDiscovery(config);
  parts.scheduler.configure(schedulerSettingsOf(settings, target.random));
  parts.bindings.configure(settings.scheduler.stickyTtlSeconds * 1000);
  parts.slots.configure(settings.queue);
  parts.slots.service.configure(settings.attainedService);
  parts.metrics.flows.attach(parts.slots, config.admission.scheduling.metrics_top_flows);
  target.health.configure(settings.probe);
  target.loadPoller.configure(settings.loadPoll);
  parts.responseOwners.configure(settings.responseOwners);
  if (
    JSON.stringify(before.admission.store) !== JSON.stringify(config.admission.store) ||
    JSON.stringify(before.affinity.store) !== JSON.stringify(config.affinity.store)
  ) {
    changed.push("affinity.store/admission.store changed: takes effect at the next restart");
  }
  let budgets = live.budgets;
  if (budgets.accepts(settings.budgets)) {
    budgets.configure(settings.budgets);
  } else if (before.admission.store.kind === "memory") {
    budgets = new TokenBudgets(settings.budgets);
    changed.push("budget window or max_agents changed: budget usage starts afresh");
  } else {
    budgets.configure(settings.budgets);
    changed.push("budget window changed: shared usage is read in the new window's buckets");
  }
  for (const backend of parts.registry.all()) parts.slots.pump(backend);
  target.connections.setLimit(target.maxConnections(settings));
  parts.metrics.initTiers(parts.registry.tiers());
  if (
    before.server.admin_port !== config.server.admin_port ||
    before.server.admin_host !== config.server.admin_host
  ) {
    changed.push("server.admin_port/admin_host changed: takes effect at the next restart");
  }
  if (before.server.host !== config.server.host || before.server.port !== config.server.port) {
    changed.push("server.host/port changed: takes effect at the next restart");
  }
  // Node reads these per connection check, so new values apply to the requests being received too.
  target.server.headersTimeout = settings.clientTimeouts.headersMs;
  target.server.requestTimeout = settings.clientTimeouts.receiveMs;
  changed.push(`changed: ${sections.join(", ")}`);
  // A fresh classifier (verdict cache) too: a reload may change the tiers, the model asked or its prompt.
  return { changed, live: liveStateFrom(settings, budgets, parts) };
}
