// Per-agent token budgets over a sliding window (pure: time is passed in), bounded in memory, with in-flight
// requests reserved against them: the memory budget store (and each replica's local view with Redis).
import type { LRUCache } from "lru-cache";
import { growingLru } from "../core/growing-lru.js";
import type { BudgetStore } from "./budget-store.js";

export interface BudgetSettings {
  windowMs: number;
  defaultBudget: number;
  /** Per-agent budgets that differ from the default. */
  overrides: ReadonlyMap<string, number>;
  /**
   * Unauthenticated agents (ids a client chose) remembered at most. When the table is full, one whose window
   * holds nothing is forgotten for a newcomer; if none is, the newcomer is refused: forgetting an agent that
   * spent would hand it a fresh budget. Agents tied to API keys live in a table of their own, never evicted.
   */
  maxAgents: number;
}

export type BudgetDecision =
  { allowed: true } | { allowed: false; retryAfterSeconds: number; used: number; budget: number };

/** Tokens held for one request in flight, from admission until it is settled or released. */
export interface Reservation {
  readonly agentId: string;
  readonly tokens: number;
}

export type ReserveDecision =
  | { allowed: true; reservation: Reservation; granted: number }
  | { allowed: false; reason: "budget"; retryAfterSeconds: number; used: number; budget: number }
  | { allowed: false; reason: "table_full"; retryAfterSeconds: number };

/**
 * The window is cut into this many buckets: usage expires one bucket at a time, so an agent costs a small
 * fixed array however much traffic it sends, at the price of up to window/BUCKETS of extra memory of usage.
 */
export const BUDGET_BUCKETS = 12;
const BUCKETS = BUDGET_BUCKETS;

interface AgentUsage {
  /** Tokens per bucket, a ring indexed by bucket number modulo BUCKETS. */
  tokens: Float64Array;
  /** The absolute bucket number each ring slot currently holds. */
  bucketOf: Float64Array;
  /** Tokens reserved by this agent's requests in flight. */
  reserved: number;
}

function newUsage(): AgentUsage {
  return {
    tokens: new Float64Array(BUCKETS),
    bucketOf: new Float64Array(BUCKETS).fill(-Infinity),
    reserved: 0,
  };
}

export class TokenBudgets implements BudgetStore {
  private readonly agents: LRUCache<string, AgentUsage>;
  /** Agents of API keys: as many as the config names, so bounded without eviction. */
  private readonly keyed = new Map<string, AgentUsage>();
  private readonly bucketMs: number;

  constructor(private settings: BudgetSettings) {
    // One more than the cap: a newcomer is let in only after an idle entry made room (see slotFor).
    this.agents = growingLru(settings.maxAgents + 1);
    this.bucketMs = settings.windowMs / BUCKETS;
  }

  private peek(agentId: string): AgentUsage | undefined {
    return this.keyed.get(agentId) ?? this.agents.peek(agentId);
  }

  budgetOf(agentId: string): number {
    return this.settings.overrides.get(agentId) ?? this.settings.defaultBudget;
  }

  /** Tokens the agent used within the window ending now. */
  used(agentId: string, nowMs: number): number {
    const usage = this.peek(agentId);
    return usage === undefined ? 0 : this.windowTotal(usage, nowMs);
  }

  /** Tokens reserved by the agent's requests in flight. */
  reserved(agentId: string): number {
    return this.peek(agentId)?.reserved ?? 0;
  }

  private windowTotal(usage: AgentUsage, nowMs: number): number {
    const current = Math.floor(nowMs / this.bucketMs);
    let total = 0;
    for (let i = 0; i < BUCKETS; i++) {
      if (current - usage.bucketOf[i]! < BUCKETS) total += usage.tokens[i]!;
    }
    return total;
  }

  /** Admits a request while the agent has budget left; otherwise says when enough of it returns. */
  check(agentId: string, nowMs: number): BudgetDecision {
    const budget = this.budgetOf(agentId);
    const settled = this.used(agentId, nowMs);
    const used = settled + this.reserved(agentId);
    if (used < budget) return { allowed: true };
    // Only requests in flight hold the rest: it comes back as they finish.
    if (settled < budget) return { allowed: false, retryAfterSeconds: 1, used, budget };
    return {
      allowed: false,
      retryAfterSeconds: this.secondsUntilBelow(this.peek(agentId)!, budget, used, nowMs),
      used,
      budget,
    };
  }

  /**
   * Holds up to `wanted` tokens for a request in flight: what the budget has left after the window's usage
   * and the other requests in flight, at least `minimum` (else refused). `granted` is what was held; the
   * caller limits the request to it. Settle or release every reservation exactly once.
   */
  reserve(
    agentId: string,
    wanted: number,
    minimum: number,
    nowMs: number,
    keyed = false,
  ): Promise<ReserveDecision> {
    return Promise.resolve(this.reserveNow(agentId, wanted, minimum, nowMs, keyed));
  }

  /** reserve(), answered at once (the Redis store decides with it while Redis is away). */
  reserveNow(
    agentId: string,
    wanted: number,
    minimum: number,
    nowMs: number,
    keyed = false,
  ): ReserveDecision {
    const usage = this.slotFor(agentId, keyed, nowMs);
    if (usage === undefined) {
      return { allowed: false, reason: "table_full", retryAfterSeconds: Math.ceil(this.bucketMs / 1000) };
    }
    const budget = this.budgetOf(agentId);
    const used = this.windowTotal(usage, nowMs) + usage.reserved;
    const left = budget - used;
    if (left < Math.max(1, minimum)) {
      return {
        allowed: false,
        reason: "budget",
        retryAfterSeconds:
          usage.reserved > 0 && this.windowTotal(usage, nowMs) < budget
            ? 1 // only requests in flight hold it: it returns as they finish
            : this.secondsUntilBelow(usage, budget, used, nowMs),
        used,
        budget,
      };
    }
    const granted = Math.min(Math.max(0, wanted), left);
    usage.reserved += granted;
    return { allowed: true, reservation: { agentId, tokens: granted }, granted };
  }

  /** Ends a reservation: charges what the request really used (0 when it failed) and frees the rest. */
  settle(reservation: Reservation, usedTokens: number, nowMs: number): void {
    const usage = this.peek(reservation.agentId);
    if (usage !== undefined) usage.reserved = Math.max(0, usage.reserved - reservation.tokens);
    this.charge(reservation.agentId, usedTokens, nowMs);
  }

  /**
   * The agent's entry, made when missing. A keyed agent always gets one. An unauthenticated newcomer to a
   * full table gets one only by taking the place of the least recently seen agent, and only when that one
   * has nothing in its window and nothing in flight; otherwise undefined (refuse the newcomer).
   */
  private slotFor(agentId: string, keyed: boolean, nowMs: number): AgentUsage | undefined {
    if (keyed) {
      let usage = this.keyed.get(agentId);
      if (usage === undefined) {
        usage = this.agents.peek(agentId) ?? newUsage();
        this.agents.delete(agentId);
        this.keyed.set(agentId, usage);
      }
      return usage;
    }
    const known = this.keyed.get(agentId) ?? this.agents.get(agentId);
    if (known !== undefined) return known;
    if (this.agents.size >= this.settings.maxAgents) {
      const oldest = this.agents.rkeys().next();
      if (oldest.done === true) return undefined;
      const entry = this.agents.peek(oldest.value)!;
      if (entry.reserved > 0 || this.windowTotal(entry, nowMs) > 0) return undefined;
      this.agents.delete(oldest.value);
    }
    const usage = newUsage();
    this.agents.set(agentId, usage);
    return usage;
  }

  charge(agentId: string, tokens: number, nowMs: number): void {
    if (!(tokens > 0)) return;
    let usage = this.keyed.get(agentId) ?? this.agents.get(agentId);
    if (usage === undefined) {
      usage = newUsage();
      this.agents.set(agentId, usage);
      // charge() without a reservation is the old path (tests, tools): keep the table at its cap.
      if (this.agents.size > this.settings.maxAgents) {
        const oldest = this.agents.rkeys().next();
        if (oldest.done !== true) this.agents.delete(oldest.value);
      }
    }
    const bucket = Math.floor(nowMs / this.bucketMs);
    const slot = bucket % BUCKETS;
    if (usage.bucketOf[slot] !== bucket) {
      usage.bucketOf[slot] = bucket;
      usage.tokens[slot] = 0;
    }
    usage.tokens[slot]! += tokens;
  }

  usage(agentId: string, nowMs: number): Promise<number> {
    return Promise.resolve(this.used(agentId, nowMs) + this.reserved(agentId));
  }

  flush(): Promise<void> {
    return Promise.resolve();
  }

  connected(): Promise<boolean> {
    return Promise.resolve(true);
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  /** Whether new settings can apply to this table in place (same window and capacity), keeping usage. */
  accepts(settings: BudgetSettings): boolean {
    return settings.windowMs === this.settings.windowMs && settings.maxAgents === this.settings.maxAgents;
  }

  /** New budgets and overrides; call only when accepts() says so. */
  configure(settings: BudgetSettings): void {
    this.settings = settings;
  }

  get agentCount(): number {
    return this.agents.size + this.keyed.size;
  }

  /** Oldest buckets expire first: the time until enough of them have to bring usage under the budget. */
  private secondsUntilBelow(usage: AgentUsage, budget: number, used: number, nowMs: number): number {
    const current = Math.floor(nowMs / this.bucketMs);
    const live: { bucket: number; tokens: number }[] = [];
    for (let i = 0; i < BUCKETS; i++) {
      if (current - usage.bucketOf[i]! < BUCKETS)
        live.push({ bucket: usage.bucketOf[i]!, tokens: usage.tokens[i]! });
    }
    live.sort((a, b) => a.bucket - b.bucket);
    let remaining = used;
    for (const { bucket, tokens } of live) {
      remaining -= tokens;
      if (remaining < budget) {
        const expiresAtMs = (bucket + BUCKETS) * this.bucketMs;
        return Math.max(1, Math.ceil((expiresAtMs - nowMs) / 1000));
      }
    }
    return Math.ceil(this.settings.windowMs / 1000);
  }
}
