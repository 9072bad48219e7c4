// Backends going down, coming up, leaving and arriving: one way to retire a backend, whatever the cause.
import { kvEventsBackendsOf } from "../kv-events/gateway-hooks.js";
import type { Backend } from "../backends/backend.js";
import type { BackendDrains } from "./backend-drain.js";
import type { HealthChecker } from "../backends/health-checker.js";
import type { GatewayParts } from "./runtime.js";
import type { AbandonReason } from "./upstream-failure.js";
import type { GatewaySettings } from "./settings.js";

export type RetireDeps = Pick<GatewayParts, "scheduler" | "slots" | "attempts">;

/**
 * What a backend that can no longer serve (down, ejected, removed from the config, gone from DNS) leaves
 * behind is released: its sessions' bindings broken (in the local view at once; a shared store's write
 * follows), its queued requests refused and its attempts in progress abandoned (each fails over). The
 * counts are for the log line.
 */
export function retireBackend(
  deps: RetireDeps,
  backend: Pick<Backend, "id" | "tier">,
  reason: Extract<AbandonReason, `backend ${string}`>,
): { bindingsBroken: Promise<number>; attemptsAbandoned: number } {
  const bindingsBroken = deps.scheduler.onBackendDown(backend.id, backend.tier);
  deps.slots.rejectWaiters(backend.id, reason);
  const attemptsAbandoned = deps.attempts.abandon(backend.id, reason);
  return { bindingsBroken, attemptsAbandoned };
}

/**
 * Subscribes to the registry's health changes. The registry calls these listeners synchronously, inside
 * recordOutcome and probe results: a request's failure that marks its engine down has retired it (bindings
 * broken) before recordOutcome returns (the attempt loop relies on this order).
 */
export function watchBackendHealth(
  deps: RetireDeps & Pick<GatewayParts, "registry" | "metrics" | "logger" | "clock">,
): void {
  const { registry, metrics, logger, clock, scheduler } = deps;
  registry.onEjectionWithheld((backend, cause) => {
    metrics.ejectionWithheld(backend.id);
    logger.warn(
      { backend: backend.id, cause },
      "backend would be ejected but is the last available one of its tier: it keeps serving",
    );
  });
  registry.onHealthChange(({ backend, to, cause, ejectedUntilMs }) => {
    if (to === "down") {
      const { bindingsBroken, attemptsAbandoned } = retireBackend(deps, backend, "backend marked down");
      if (ejectedUntilMs !== undefined) metrics.ejection(backend.id, cause);
      const ejectedForMs = ejectedUntilMs === undefined ? undefined : ejectedUntilMs - clock.nowMs();
      void bindingsBroken.then((broken) =>
        logger.warn(
          { backend: backend.id, cause, bindingsBroken: broken, attemptsAbandoned, ejectedForMs },
          ejectedUntilMs === undefined ? "backend down" : "backend ejected",
        ),
      );
    } else {
      void scheduler
        .onBackendUp(backend.id, registry.tier(backend.tier))
        .then((moved) => logger.info({ backend: backend.id, cause, sessionsMovedBack: moved }, "backend up"));
    }
  });
}

export type BackendChangeDeps = RetireDeps &
  Pick<GatewayParts, "registry" | "pools" | "metrics" | "kvCache"> & {
    /** Where removed backends drain (backend-drain.ts); without it they are cut at once. */
    readonly drains?: BackendDrains;
  };

/**
 * Makes the registry hold the config's static backends plus the discovered ones. A backend that left
 * (the file, or DNS) is retired like an engine going down; one that arrived takes traffic only after its
 * first probe succeeds (the registry keeps it down until then). Returns what changed, for the log.
 */
export function applyBackends(
  deps: BackendChangeDeps,
  health: HealthChecker,
  settings: GatewaySettings,
  wasDiscovered: ReadonlySet<string>,
): string[] {
  const changed: string[] = [];
  const removed = deps.registry.reconfigure(settings.backends, settings.thresholds);
  for (const backend of removed) {
    const reason = wasDiscovered.has(backend.id) ? "backend left discovery" : "backend removed from config";
    const held = deps.scheduler.bindingsOf(backend.id);
    if (deps.drains !== undefined) {
      const drainSeconds = settings.drainMs / 1000;
      const inFlight = deps.drains.start(backend, reason, settings.drainMs);
      changed.push(
        `removed backend ${backend.id} (its ${held} bindings broken; ${inFlight} requests in flight drain for up to ${drainSeconds} s)`,
      );
      continue;
    }
    void retireBackend(deps, backend, reason).bindingsBroken;
    deps.pools.drop(backend.id);
    changed.push(`removed backend ${backend.id} (its ${held} bindings broken)`);
  }
  health.configure(settings.probe);
  deps.kvCache?.configure(kvEventsBackendsOf(settings.backends));
  for (const backend of deps.registry.all()) deps.slots.pump(backend);
  deps.metrics.initTiers(deps.registry.tiers());
  return changed;
}
