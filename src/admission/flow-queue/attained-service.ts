// Each flow's attained service: weighted tokens served, decaying with a half-life, bounded in memory (LRU).
import type { Clock } from "../../core/clock.js";

export interface AttainedServiceSettings {
  /** Service served this long ago counts half: the past fades, so an agent idle for a while starts afresh. */
  halfLifeMs: number;
  /** Flows remembered at most; the least recently charged are forgotten first (as if they had been idle). */
  maxFlows: number;
}

interface Entry {
  /** Service at `atMs`. */
  value: number;
  atMs: number;
}

/** Below this many weighted tokens a flow is as good as new: its entry is dropped when next read. */
const FORGOTTEN_BELOW = 0.5;

export class AttainedService {
  /** Map order is recency of charge: the first entry is the least recently charged. */
  private readonly flows = new Map<string, Entry>();
  /** Service charged here since the last takeUnsynced(): what a shared store has not been told yet. */
  private unsynced = new Map<string, number>();

  constructor(
    private settings: AttainedServiceSettings,
    private readonly clock: Clock,
  ) {}

  configure(settings: AttainedServiceSettings): void {
    this.settings = settings;
    while (this.flows.size > settings.maxFlows) this.evictOldest();
  }

  get size(): number {
    return this.flows.size;
  }

  /** The flow's service decayed to now (0 for a flow never charged or forgotten). */
  value(flow: string): number {
    const entry = this.flows.get(flow);
    if (entry === undefined) return 0;
    const value = this.decayed(entry, this.clock.nowMs());
    if (value < FORGOTTEN_BELOW && !this.unsynced.has(flow)) this.flows.delete(flow);
    return value;
  }

  /** Every remembered flow's service decayed to now (flows decayed to nothing left out): the active flows. */
  activeValues(): number[] {
    const nowMs = this.clock.nowMs();
    const values: number[] = [];
    for (const entry of this.flows.values()) {
      const value = this.decayed(entry, nowMs);
      if (value >= FORGOTTEN_BELOW) values.push(value);
    }
    return values;
  }

  /** Adds service (weighted tokens; a negative amount corrects an estimate that was too high). */
  charge(flow: string, tokens: number): void {
    if (tokens === 0 || !Number.isFinite(tokens)) return;
    const nowMs = this.clock.nowMs();
    const entry = this.flows.get(flow);
    const value = Math.max(0, (entry === undefined ? 0 : this.decayed(entry, nowMs)) + tokens);
    this.flows.delete(flow);
    this.flows.set(flow, { value, atMs: nowMs });
    if (this.flows.size > this.settings.maxFlows) this.evictOldest();
    if (this.unsynced.has(flow) || this.unsynced.size < this.settings.maxFlows) {
      this.unsynced.set(flow, (this.unsynced.get(flow) ?? 0) + tokens);
    }
  }

  /** The service charged since the last call, per flow, for a shared store to add up; cleared here. */
  takeUnsynced(): Map<string, number> {
    const taken = this.unsynced;
    this.unsynced = new Map();
    return taken;
  }

  /** Deltas a shared store could not take (it was away) are kept for the next try. */
  returnUnsynced(deltas: ReadonlyMap<string, number>): void {
    for (const [flow, tokens] of deltas) {
      if (!this.unsynced.has(flow) && this.unsynced.size >= this.settings.maxFlows) continue;
      this.unsynced.set(flow, (this.unsynced.get(flow) ?? 0) + tokens);
    }
  }

  /** The replicas' total for a flow (decayed to now by the store) replaces what this replica knew. */
  adopt(flow: string, value: number): void {
    if (!Number.isFinite(value) || value < 0) return;
    if (!this.flows.has(flow) && this.flows.size >= this.settings.maxFlows) this.evictOldest();
    this.flows.set(flow, { value, atMs: this.clock.nowMs() });
  }

  private decayed(entry: Entry, nowMs: number): number {
    const ageMs = Math.max(0, nowMs - entry.atMs);
    return entry.value * Math.pow(2, -ageMs / this.settings.halfLifeMs);
  }

  private evictOldest(): void {
    const oldest = this.flows.keys().next();
    if (oldest.done !== true) this.flows.delete(oldest.value);
  }
}
