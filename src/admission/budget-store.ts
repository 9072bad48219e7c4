// The interface of a per-agent token budget store, so replicas can share one (Redis) instead of each its own.
import type { BudgetSettings } from "./token-budgets.js";

/** What admit() decided: in (with what it reserved) or out (with when enough budget returns). */
export type BudgetAdmission =
  | { allowed: true; reservedTokens: number }
  | { allowed: false; retryAfterSeconds: number; used: number; budget: number };

/**
 * A sliding-window token budget per agent. The life of one request: admit() when it arrives (refused once the
 * agent's usage in the window reaches its budget; `reserveTokens`, counted at once, lets a caller hold back
 * what the request may use, e.g. prompt + max_tokens), then exactly one of settle() with what the engine
 * reported it really used, or release() when it used nothing. With a reservation of 0 this is "check, then
 * charge the real usage", the gateway's behaviour today.
 */
export interface BudgetStore {
  /** Admits while the agent's usage in the window ending now is under its budget, reserving `reserveTokens`. */
  admit(agentId: string, reserveTokens: number, nowMs: number): Promise<BudgetAdmission>;
  /** Replaces the reservation by the real usage (the difference is counted now; it may be negative). */
  settle(agentId: string, reservedTokens: number, usedTokens: number, nowMs: number): void;
  /** Gives a reservation back (the request used nothing). */
  release(agentId: string, reservedTokens: number, nowMs: number): void;
  /** Tokens the agent used within the window ending now, as this store sees it. */
  usage(agentId: string, nowMs: number): Promise<number>;
  budgetOf(agentId: string): number;
  /** Whether new settings can apply in place (same window and capacity), keeping usage. */
  accepts(settings: BudgetSettings): boolean;
  /** New budgets and overrides; call only when accepts() says so. */
  configure(settings: BudgetSettings): void;
  /** Resolves when every settle() and release() issued so far has landed (or failed open). */
  flush(): Promise<void>;
  close(): Promise<void>;
}
