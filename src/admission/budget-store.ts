// The interface of a per-agent token budget store, so replicas can share one (Redis) instead of each its own.
import type { BudgetDecision, BudgetSettings, Reservation, ReserveDecision } from "./token-budgets.js";

/**
 * A sliding-window token budget per agent. The life of one request: check() when it arrives (a cheap
 * pre-filter before its body is read), reserve() once its prompt and max_tokens are known (the decision
 * that counts: it holds what the request may use, so concurrent requests cannot overspend), then exactly one
 * settle() with what the engine reported (0 when the request failed).
 */
export interface BudgetStore {
  /**
   * Refuses an agent whose budget is spent as this replica knows it. It may admit what the shared store later
   * refuses (reserve() decides), never the other way round.
   */
  check(agentId: string, nowMs: number): BudgetDecision;
  /** Holds up to `wanted` tokens (at least `minimum`, else refused) for a request in flight. */
  reserve(
    agentId: string,
    wanted: number,
    minimum: number,
    nowMs: number,
    keyed: boolean,
  ): Promise<ReserveDecision>;
  /** Ends a reservation: charges what the request really used and frees the rest of the hold. */
  settle(reservation: Reservation, usedTokens: number, nowMs: number): void;
  /** Tokens the agent used within the window ending now, in flight included, as this store sees it. */
  usage(agentId: string, nowMs: number): Promise<number>;
  budgetOf(agentId: string): number;
  /** Whether new settings can apply in place (same window and capacity), keeping usage. */
  accepts(settings: BudgetSettings): boolean;
  /** New budgets and overrides; call only when accepts() says so. */
  configure(settings: BudgetSettings): void;
  /** Resolves when every settle() issued so far has landed (or failed open). */
  flush(): Promise<void>;
  /** Resolves true once the store answers (at once for memory), false after `timeoutMs`. */
  connected(timeoutMs: number): Promise<boolean>;
  close(): Promise<void>;
}
