// The receipt rules (pure): how many prompt tokens a turn could have reused from its session's previous turn,
// how many the engine says it did, and the one cause of the difference.
import type { ConversationFingerprint } from "./fingerprint.js";

/**
 * Why a turn reused less than its previous turn left in an engine's cache (`none`: it lost nothing):
 * - new_session: no previous turn known (nothing to reuse);
 * - conversation_changed: the request does not extend the previous conversation (history compacted, truncated
 *   or edited; a sessionless request whose prefix key last served another conversation);
 * - spill, failover, binding_expired, tier_changed: placed on another engine, for that reason;
 * - rerouted: placed on another engine for any other reason (affinity off, a forgotten binding, a balancer);
 * - migrated: its engine broke mid-answer and another engine continued the answer (src/gateway/continuation);
 * - evicted: the same engine, but it no longer held the blocks.
 */
export const LOST_CAUSES = [
  "none",
  "new_session",
  "conversation_changed",
  "spill",
  "failover",
  "binding_expired",
  "tier_changed",
  "rerouted",
  "evicted",
  "migrated",
] as const;
export type LostCause = (typeof LOST_CAUSES)[number];

/** What the gateway remembers of a session's last turn (in memory or Redis). */
export interface TurnRecord {
  /** Conversation items (messages, input items) the turn sent. */
  readonly items: number;
  /** The fingerprint's chain hash over those items. */
  readonly chain: string;
  /** Responses API: the id of the response the engine stored (a continuation names it). */
  readonly responseId?: string | undefined;
  /** The turn's prompt tokens, and prompt plus completion (the engine's usage). */
  readonly promptTokens: number;
  readonly tokens: number;
  readonly backendId: string;
  readonly tier: string;
  readonly atMs: number;
}

/** Where this turn was placed, and why (the scheduler's reason of its answering attempt). */
export interface TurnPlacement {
  readonly backendId: string;
  readonly tier: string;
  readonly reason: string;
  /** Tokens placement expected the engine to hold, by its KV events (absent: the engine publishes none). */
  readonly expectedCachedTokens?: number | undefined;
}

export interface Receipt {
  readonly reusableTokens: number;
  readonly cachedTokens: number;
  /** reusable - cached, never negative (an engine may reuse more: a prefix shared with other sessions). */
  readonly lostTokens: number;
  readonly lostCause: LostCause;
  /** The prediction from the engine's KV events (placement's), when it publishes them. */
  readonly expectedCachedTokens?: number | undefined;
  readonly backendId: string;
  readonly tier: string;
  readonly atMs: number;
}

/**
 * Tokens of a cached sequence an engine can serve again: whole KV blocks only, and never the sequence's last
 * token (the engine never computed the KV of the last token it generated, as vLLM).
 */
export function reusableOf(tokens: number, blockTokens: number): number {
  if (tokens <= 1) return 0;
  return Math.floor((tokens - 1) / blockTokens) * blockTokens;
}

/**
 * Tokens of the previous turn this request can reuse: the whole previous conversation when the request extends
 * it (its first items hash alike and the next is the assistant's reply, or it continues the stored response),
 * the previous prompt when it repeats it (a retry); undefined when it does not continue it.
 */
export function continuedTokens(
  previous: TurnRecord,
  fingerprint: ConversationFingerprint,
): number | undefined {
  if (fingerprint.previousResponseId !== undefined) {
    return fingerprint.previousResponseId === previous.responseId ? previous.tokens : undefined;
  }
  if (previous.items > fingerprint.items || fingerprint.chainAt(previous.items) !== previous.chain)
    return undefined;
  if (previous.items === fingerprint.items) return previous.promptTokens;
  return fingerprint.isReply(previous.items) ? previous.tokens : undefined;
}

/** The receipt of one turn. */
export function receiptOf(
  previous: TurnRecord | undefined,
  fingerprint: ConversationFingerprint,
  placement: TurnPlacement,
  cachedTokens: number,
  blockTokens: number,
  nowMs: number,
): Receipt {
  let reusableTokens = 0;
  let lostTokens = 0;
  let lostCause: LostCause;
  if (previous === undefined) lostCause = "new_session";
  else {
    const continued = continuedTokens(previous, fingerprint);
    if (continued === undefined) lostCause = "conversation_changed";
    else {
      reusableTokens = reusableOf(continued, blockTokens);
      lostTokens = Math.max(0, reusableTokens - cachedTokens);
      lostCause = lostTokens === 0 ? "none" : placementCause(previous, placement);
    }
  }
  return {
    reusableTokens,
    cachedTokens,
    lostTokens,
    lostCause,
    expectedCachedTokens: placement.expectedCachedTokens,
    backendId: placement.backendId,
    tier: placement.tier,
    atMs: nowMs,
  };
}

/** Why tokens were lost, given where the previous turn ran and why this one ran where it did. */
function placementCause(previous: TurnRecord, placement: TurnPlacement): LostCause {
  if (placement.reason === "migrated") return "migrated";
  if (placement.backendId === previous.backendId) return "evicted";
  switch (placement.reason) {
    case "spill":
      return "spill";
    case "failover":
    case "rebind_backend_down":
      return "failover";
    case "rebind_tier_changed":
      return "tier_changed";
    case "rebind_expired":
      return "binding_expired";
  }
  return placement.tier !== previous.tier ? "tier_changed" : "rerouted";
}

/** The record this turn leaves for the next. */
export function turnRecordOf(
  fingerprint: ConversationFingerprint,
  usage: { promptTokens: number; completionTokens: number },
  placement: TurnPlacement,
  responseId: string | undefined,
  nowMs: number,
): TurnRecord {
  // One shape whether or not there is a response id (a conditional spread costs more than the rest here).
  return {
    items: fingerprint.items,
    chain: fingerprint.chainAt(fingerprint.items),
    responseId,
    promptTokens: usage.promptTokens,
    tokens: usage.promptTokens + usage.completionTokens,
    backendId: placement.backendId,
    tier: placement.tier,
    atMs: nowMs,
  };
}
