// The backends and tiers of the current config, with health transitions published to listeners.
import type { BackendConfig } from "../config/schema.js";
import { systemClock, type Clock } from "../core/clock.js";
import { Backend } from "./backend.js";
import type { EjectOutcome, Health, HealthThresholds } from "./health-state.js";

export interface HealthTransition {
  backend: Backend;
  to: Health;
  /** What decided it: an active probe, a real request's outcome, or the engine's stalled token counters. */
  cause: "probe" | "request" | "progress";
  /** Set when an outlier ejection took it down: when the ejection may end (clock ms). */
  ejectedUntilMs?: number;
}

export type HealthListener = (transition: HealthTransition) => void;

/** An ejection that did not happen because the engine is the last available one of its tier. */
export type WithheldListener = (backend: Backend, cause: "request" | "progress") => void;

export class BackendRegistry {
  private readonly byId = new Map<string, Backend>();
  private readonly byTier = new Map<string, Backend[]>();
  private readonly tierByModel = new Map<string, string>();
  private readonly listeners: HealthListener[] = [];
  private withheldListener: WithheldListener | undefined;

  constructor(
    configs: readonly BackendConfig[],
    thresholds: HealthThresholds,
    private readonly clock: Clock = systemClock,
  ) {
    for (const config of configs) this.byId.set(config.id, new Backend(config, thresholds));
    this.reindex();
  }

  /** Subscribes to health transitions; returns the unsubscribe function. */
  onHealthChange(listener: HealthListener): () => void {
    this.listeners.push(listener);
    return () => {
      const at = this.listeners.indexOf(listener);
      if (at >= 0) this.listeners.splice(at, 1);
    };
  }

  get(id: string): Backend | undefined {
    return this.byId.get(id);
  }

  all(): IterableIterator<Backend> {
    return this.byId.values();
  }

  tiers(): string[] {
    return [...this.byTier.keys()];
  }

  hasTier(tier: string): boolean {
    return this.byTier.has(tier);
  }

  /** The backends of one tier, in config order (an empty list for an unknown tier). */
  tier(tier: string): readonly Backend[] {
    return this.byTier.get(tier) ?? [];
  }

  /** The tier whose backends serve `model`; the first such tier in config order. */
  tierOfModel(model: string): string | undefined {
    return this.tierByModel.get(model);
  }

  models(): string[] {
    return [...this.tierByModel.keys()];
  }

  /** True when some backend of any tier can take a request. */
  anyAvailable(): boolean {
    for (const backend of this.byId.values()) if (backend.state !== "down") return true;
    return false;
  }

  /** Who hears of ejections withheld from the last available engine of a tier (one listener). */
  onEjectionWithheld(listener: WithheldListener | undefined): void {
    this.withheldListener = listener;
  }

  recordOutcome(backend: Backend, ok: boolean, cause: "probe" | "request"): void {
    if (backend.awaitingFirstProbe) {
      // Added while running (reload, discovery): only a successful probe lets it take traffic.
      if (!ok || cause !== "probe") return;
      backend.awaitingFirstProbe = false;
      if (backend.state !== "down")
        for (const listener of [...this.listeners]) listener({ backend, to: "up", cause });
      return;
    }
    const nowMs = this.clock.nowMs();
    if (cause === "probe") {
      this.publish(backend, backend.health.recordProbe(ok, nowMs), cause);
      return;
    }
    const { to, eject } = backend.health.recordRequest(ok, nowMs, this.mayEject(backend));
    this.report(backend, eject, cause);
    this.publish(backend, to, cause);
  }

  /** A reading of the engine's cumulative token counters (prompt + generated) from its /metrics. */
  recordProgress(backend: Backend, tokenCount: number): void {
    if (backend.awaitingFirstProbe) return;
    const busy = backend.inflight > 0;
    const { to, eject } = backend.health.recordProgress(
      tokenCount,
      busy,
      this.clock.nowMs(),
      this.mayEject(backend),
    );
    this.report(backend, eject, "progress");
    this.publish(backend, to, "progress");
  }

  /**
   * Never eject the last engine of a tier that takes new sessions: it serves, and the ejection is reported.
   * A draining engine does not count (it serves only its pinned sessions).
   */
  private mayEject(backend: Backend): boolean {
    for (const other of this.tier(backend.tier)) if (other !== backend && other.state === "up") return true;
    return false;
  }

  private report(backend: Backend, eject: EjectOutcome, cause: "request" | "progress"): void {
    if (eject === "withheld") this.withheldListener?.(backend, cause);
  }

  private publish(backend: Backend, to: Health | undefined, cause: HealthTransition["cause"]): void {
    if (to === undefined) return;
    const ejectedUntilMs = backend.health.ejectedUntilMs;
    const transition: HealthTransition =
      to === "down" && ejectedUntilMs !== undefined
        ? { backend, to, cause, ejectedUntilMs }
        : { backend, to, cause };
    for (const listener of [...this.listeners]) listener(transition);
  }

  /**
   * Applies a reloaded backend list: new ids are added (down until their first probe succeeds, then taking
   * new sessions), kept ids are updated in
   * place, and the removed backends are returned so the caller can treat them like an engine going down.
   * A kept id that changes tier is handled as a removal plus an addition.
   */
  reconfigure(configs: readonly BackendConfig[], thresholds: HealthThresholds): Backend[] {
    const wanted = new Map(configs.map((config) => [config.id, config]));
    const removed = [...this.byId.values()].filter(
      (backend) => wanted.get(backend.id)?.tier !== backend.tier,
    );
    const previous = new Map(this.byId);
    this.byId.clear();
    // Rebuilt in the new config's order, so listings and tie-breaks follow the file.
    for (const config of configs) {
      const existing = previous.get(config.id);
      if (existing !== undefined && existing.tier === config.tier) {
        existing.update(config);
        existing.health.setThresholds(thresholds);
        this.byId.set(config.id, existing);
      } else {
        const added = new Backend(config, thresholds);
        added.awaitingFirstProbe = true;
        this.byId.set(config.id, added);
      }
    }
    this.reindex();
    return removed;
  }

  private reindex(): void {
    this.byTier.clear();
    this.tierByModel.clear();
    for (const backend of this.byId.values()) {
      const list = this.byTier.get(backend.tier);
      if (list) list.push(backend);
      else this.byTier.set(backend.tier, [backend]);
      if (!this.tierByModel.has(backend.model)) this.tierByModel.set(backend.model, backend.tier);
    }
  }
}
