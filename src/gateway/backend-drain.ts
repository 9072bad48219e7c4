// Engines leaving the gateway (reload, DNS discovery) are drained: no new requests, in-flight ones finish up
// to upstream.drain_seconds, then their connections close. Cutting them at once would end live streams.
import type { Pool } from "undici";
import type { Backend } from "../backends/backend.js";
import type { Clock, Timers } from "../core/clock.js";
import type { GatewayParts } from "./runtime.js";
import type { UpstreamPools } from "./upstream-pools.js";

export type DrainReason = "backend removed from config" | "backend left discovery";

export interface DrainDeps {
  readonly pools: Pick<UpstreamPools, "detach" | "drop">;
  readonly registry: Pick<GatewayParts["registry"], "get">;
  readonly scheduler: Pick<GatewayParts["scheduler"], "onBackendDown">;
  readonly slots: Pick<GatewayParts["slots"], "rejectWaiters">;
  readonly logger: {
    info(fields: object, message: string): void;
    warn(fields: object, message: string): void;
  };
  readonly clock: Clock;
  readonly timers: Timers;
}

interface Draining {
  readonly pool: Pool;
  cancelBound: () => void;
}

/**
 * The backends being drained. A removed backend is out of the registry already (so no placement picks it):
 * here its sessions' bindings are broken (their next turns go elsewhere), the requests queued for one of its
 * slots are refused (they fail over at once: nothing started), and its connection pool is detached and
 * closed gracefully: what runs on it (streams, and non-streaming answers still being generated) finishes.
 * What still runs after `drainMs` is cut (an uncommitted attempt then fails over like any engine failure; a
 * stream already relaying ends with its error event).
 */
export class BackendDrains {
  private readonly draining = new Map<string, Draining>();

  constructor(private readonly deps: DrainDeps) {}

  /** Backends whose in-flight requests are still finishing. */
  get size(): number {
    return this.draining.size;
  }

  /** Starts draining a removed backend; returns the requests it had in flight (for the reload's log). */
  start(backend: Pick<Backend, "id" | "tier" | "inflight">, reason: DrainReason, drainMs: number): number {
    const { deps } = this;
    void deps.scheduler.onBackendDown(backend.id, backend.tier);
    deps.slots.rejectWaiters(backend.id, reason);
    const inFlight = backend.inflight;
    const pool = deps.pools.detach(backend.id);
    if (pool === undefined) return inFlight;
    const startedMs = deps.clock.nowMs();
    // The same id may leave twice (removed, re-added, removed again): the older drain is cut now.
    void this.cut(backend.id);
    deps.logger.info(
      { backend: backend.id, reason, inFlight, drainSeconds: drainMs / 1000 },
      inFlight > 0
        ? "backend draining: its requests in flight finish, it takes no new ones"
        : "backend removed",
    );
    const entry: Draining = { pool, cancelBound: () => undefined };
    this.draining.set(backend.id, entry);
    entry.cancelBound = deps.timers.after(drainMs, () => {
      if (this.draining.get(backend.id) !== entry) return;
      deps.logger.warn(
        { backend: backend.id, reason, cut: pool.stats.size, drainSeconds: drainMs / 1000 },
        "backend drain bound reached: closing it with requests still in flight",
      );
      this.cut(backend.id);
    });
    // close() resolves once every request on the pool has ended (and refuses new ones meanwhile).
    void pool.close().then(
      () => {
        if (this.draining.get(backend.id) !== entry) return;
        entry.cancelBound();
        this.draining.delete(backend.id);
        this.dropLateEntry(backend.id);
        if (inFlight > 0)
          deps.logger.info(
            { backend: backend.id, reason, drainedMs: Math.round(deps.clock.nowMs() - startedMs) },
            "backend drained: its last request finished, connections closed",
          );
      },
      () => undefined,
    );
    return inFlight;
  }

  /** Cuts every drain at once (the gateway is closing). */
  async close(): Promise<void> {
    const ids = [...this.draining.keys()];
    await Promise.all(ids.map((id) => this.cut(id)));
  }

  /** Destroys a draining pool: whatever still runs on it fails now. */
  private async cut(backendId: string): Promise<void> {
    const entry = this.draining.get(backendId);
    if (entry === undefined) return;
    this.draining.delete(backendId);
    entry.cancelBound();
    this.dropLateEntry(backendId);
    await entry.pool.destroy().catch(() => undefined);
  }

  /** An attempt placed just before the removal may have made the backend a fresh pool since: it goes too. */
  private dropLateEntry(backendId: string): void {
    if (this.deps.registry.get(backendId) === undefined) this.deps.pools.drop(backendId);
  }
}
