// A placement policy that replaces session affinity altogether: the cache-aware routers of other projects.
import type { PlacementCandidate } from "../placement/types.js";

/** What a policy reads of one attempt: the tier, the text it routes by, and the backends already failed. */
export interface PolicyRequest {
  readonly tier: string;
  /** The prompt text the policy routes by (see routing-text.ts); empty when the request has none. */
  readonly text: string;
  /** The whole serialised prompt (llm-d hashes the JSON of the messages). */
  readonly promptBytes: string;
  readonly exclude: ReadonlySet<string>;
}

/** Why a policy chose a backend; reported in `x_agent_serve.reason`. */
export type PolicyReason =
  | "cache_match" // SGLang: the longest prefix match, above cache_threshold
  | "smallest_tree" // SGLang: no good match, the backend with the least text routed to it
  | "least_load" // SGLang: the tier is imbalanced, the least loaded backend
  | "max_score"; // llm-d: the highest weighted score of its scorers

export interface PolicyDecision<T extends PlacementCandidate> {
  readonly backend: T;
  readonly reason: PolicyReason;
}

/**
 * Chooses among a tier's candidates (state, load and engine readings as placement sees them) and
 * records what it chose in its own index. Pure apart from that index: time comes in as `nowMs`.
 */
export interface PlacementPolicy {
  readonly name: string;
  /** The name and settings: a reload that leaves it unchanged keeps the policy and its index. */
  readonly key: string;
  select<T extends PlacementCandidate>(
    request: PolicyRequest,
    candidates: readonly T[],
    nowMs: number,
  ): PolicyDecision<T> | undefined;
}
