// The backends and tiers of the current config, with health transitions published to listeners.
import type { BackendConfig } from "../config/schema.js";
import { Backend } from "./backend.js";
import type { Health, HealthThresholds } from "./health-state.js";

export interface HealthTransition {
  backend: Backend;
  to: Health;
  /** What decided it: an active probe or a real request's outcome. */
  cause: "probe" | "request";
}

export type HealthListener = (transition: HealthTransition) => void;

export class BackendRegistry {
  private readonly byId = new Map<string, Backend>();
  private readonly byTier = new Map<string, Backend[]>();
  private readonly tierByModel = new Map<string, string>();
  private readonly listeners: HealthListener[] = [];

  constructor(configs: readonly BackendConfig[], thresholds: HealthThresholds) {
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

  recordOutcome(backend: Backend, ok: boolean, cause: HealthTransition["cause"]): void {
    if (backend.awaitingFirstProbe) {
      if (!ok || cause !== "probe") return;
      backend.awaitingFirstProbe = false;
      if (backend.state !== "down")
        for (const listener of [...this.listeners]) listener({ backend, to: "up", cause });
      return;
    }
    const to = ok ? backend.health.recordSuccess() : backend.health.recordFailure();
    if (to === undefined) return;
    for (const listener of [...this.listeners]) listener({ backend, to, cause });
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
