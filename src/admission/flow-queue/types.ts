// What the flow scheduler's parts share: a waiting request as a policy sees it, and the policy contract.

/** A waiting request, as much of it as a policy reads: whose it is, its band, its place in arrival order. */
export interface FlowItem {
  /** The flow (an agent, else a session) it belongs to: shares are counted per flow. */
  readonly flow: string;
  /** Its priority band: a higher band is always served first (strict priority). */
  readonly band: number;
  /** Arrival order across the whole queue: smaller came first. */
  readonly seq: number;
}

/**
 * Orders the waiting requests of one priority band. `take` removes and returns the request to serve next
 * among those `eligible` accepts (the caller says which can start now: the right engine has a slot, the flow
 * is under its cap); `last` names the request the policy would serve last, the one shed first.
 */
export interface FlowPolicy<T extends FlowItem> {
  readonly size: number;
  push(item: T): void;
  /** Removes a waiting request (it timed out or was withdrawn); false if it was not here. */
  remove(item: T): boolean;
  take(eligible: (item: T) => boolean): T | undefined;
  last(): T | undefined;
}

export const FLOW_POLICY_NAMES = ["fifo", "fair", "least-attained"] as const;
export type FlowPolicyName = (typeof FLOW_POLICY_NAMES)[number];
