// Per-agent token budgets over a sliding window (pure: time is passed in), bounded in memory: the memory store.
import { LRUCache } from "lru-cache";
import type { BudgetAdmission, BudgetStore } from "./budget-store.js";

export interface BudgetSettings {
  windowMs: number;
  defaultBudget: number;
  /** Per-agent budgets that differ from the default. */
  overrides: ReadonlyMap<string, number>;
  /** Agents remembered at most; the least recently seen is forgotten first. */
  maxAgents: number;
}

export type BudgetDecision =
  { allowed: true } | { allowed: false; retryAfterSeconds: number; used: number; budget: number };

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
}

export class TokenBudgets implements BudgetStore {
  private readonly agents: LRUCache<string, AgentUsage>;
  private readonly bucketMs: number;

  constructor(private settings: BudgetSettings) {
    this.agents = new LRUCache({ max: settings.maxAgents });
    this.bucketMs = settings.windowMs / BUCKETS;
  }

  budgetOf(agentId: string): number {
    return this.settings.overrides.get(agentId) ?? this.settings.defaultBudget;
  }

  /** Tokens the agent used within the window ending now. */
  used(agentId: string, nowMs: number): number {
    const usage = this.agents.peek(agentId);
    if (usage === undefined) return 0;
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
    const used = this.used(agentId, nowMs);
    if (used < budget) return { allowed: true };
    return {
      allowed: false,
      retryAfterSeconds: this.secondsUntilBelow(agentId, budget, used, nowMs),
      used,
      budget,
    };
  }

  admit(agentId: string, reserveTokens: number, nowMs: number): Promise<BudgetAdmission> {
    return Promise.resolve(this.admitNow(agentId, reserveTokens, nowMs));
  }

  /** admit(), answered synchronously (the Redis store's fallback decides with it). */
  admitNow(agentId: string, reserveTokens: number, nowMs: number): BudgetAdmission {
    const decision = this.check(agentId, nowMs);
    if (!decision.allowed) return decision;
    this.charge(agentId, reserveTokens, nowMs);
    return { allowed: true, reservedTokens: reserveTokens > 0 ? reserveTokens : 0 };
  }

  settle(agentId: string, reservedTokens: number, usedTokens: number, nowMs: number): void {
    const delta = (usedTokens > 0 ? usedTokens : 0) - reservedTokens;
    if (Number.isFinite(delta) && delta !== 0) this.add(agentId, delta, nowMs);
  }

  release(agentId: string, reservedTokens: number, nowMs: number): void {
    this.settle(agentId, reservedTokens, 0, nowMs);
  }

  usage(agentId: string, nowMs: number): Promise<number> {
    return Promise.resolve(this.used(agentId, nowMs));
  }

  flush(): Promise<void> {
    return Promise.resolve();
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  charge(agentId: string, tokens: number, nowMs: number): void {
    if (!(tokens > 0)) return;
    this.add(agentId, tokens, nowMs);
  }

  /** Adds a signed amount to the agent's bucket of `nowMs`. */
  private add(agentId: string, tokens: number, nowMs: number): void {
    let usage = this.agents.get(agentId);
    if (usage === undefined) {
      usage = { tokens: new Float64Array(BUCKETS), bucketOf: new Float64Array(BUCKETS).fill(-Infinity) };
      this.agents.set(agentId, usage);
    }
    const bucket = Math.floor(nowMs / this.bucketMs);
    const slot = bucket % BUCKETS;
    if (usage.bucketOf[slot] !== bucket) {
      usage.bucketOf[slot] = bucket;
      usage.tokens[slot] = 0;
    }
    usage.tokens[slot]! += tokens;
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
    return this.agents.size;
  }

  /** Oldest buckets expire first: the time until enough of them have to bring usage under the budget. */
  private secondsUntilBelow(agentId: string, budget: number, used: number, nowMs: number): number {
    const usage = this.agents.peek(agentId)!;
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
