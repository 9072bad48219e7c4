// Scorer: the cheapest engine by KV events: prefill it must do (weighted) plus the prefill work ahead there.
import { prefillWorkTokens } from "../../kv-events/pending-blocks.js";
import type { PlacementCandidate, PlacementRequest, Scorer } from "./types.js";

/**
 * How much a prompt token the engine must compute weighs against a token of prefill already queued there (Dynamo's
 * overlap weight). 2, not 1: a token recomputed delays this request and also every request queued behind it on
 * that engine, where work already queued delays only this one. At 1 the cost is this request's own time to first
 * token, and a burst of calls sharing a short prefix scatters to idle engines, each prefilling the prefix again.
 */
export const KV_PREFILL_WEIGHT = 2;

/**
 * A request's cost on an engine, in prompt tokens at no context: KV_PREFILL_WEIGHT x the prefill it must do there
 * (the prompt past the prefix the engine holds) plus the prefill the engine must do first for requests already sent
 * to it, as Dynamo's KV router weighs prefill blocks against active blocks. Both count attention
 * (prefillWorkTokens with the request's prefillContextWeight): a token computed after 150,000 others costs about five
 * at no context on a 7B model, so a session's 8,000-token turn queued on an engine is more work ahead than a
 * sub-agent's 8,000 tokens (docs/kv-events.md, fourteenth round). Without the prompt's length (engines matched by
 * session only) the held tokens alone rank, as before.
 */
export function kvCostTokens(request: PlacementRequest, candidate: PlacementCandidate): number {
  const held = request.cachedTokens?.get(candidate.id) ?? 0;
  const active = request.activeWork?.get(candidate.id) ?? 0;
  const prompt = request.promptTokens;
  if (prompt === undefined) return active - KV_PREFILL_WEIGHT * held;
  const context = Math.min(held, prompt);
  const own = prefillWorkTokens(prompt - context, context, request.prefillContextWeight ?? 0);
  return active + KV_PREFILL_WEIGHT * own;
}

/**
 * What a new conversation placed on an engine pushes out of it, in prompt tokens: what it must prefill there
 * beyond the engine's room (its cache's free blocks less the prefill already sent there). Zero without the
 * prompt's length or the engine's room.
 */
export function kvDisplacedTokens(request: PlacementRequest, candidate: PlacementCandidate): number {
  const room = request.roomTokens?.get(candidate.id);
  if (room === undefined || request.promptTokens === undefined) return 0;
  const held = request.cachedTokens?.get(candidate.id) ?? 0;
  return Math.max(0, request.promptTokens - held - room);
}

/**
 * Whether `heldTokens` on an engine are the request's conversation itself, not just an opening it shares with
 * others: the prompt continues a conversation (it carries an earlier answer) and the engine holds at least half
 * of it. Without the prompt's length (engines matched by session only), what an engine holds is the session's own.
 */
export function holdsConversation(request: PlacementRequest, heldTokens: number): boolean {
  if (request.opensConversation === true) return false;
  const prompt = request.promptTokens;
  return prompt === undefined ? heldTokens > 0 : 2 * heldTokens >= prompt;
}

/**
 * Whether the request starts a conversation no engine has: it opens one (a first call, a sub-agent's first call),
 * or no engine holds half its prompt (holdsConversation). Such a request finds at most a shared prefix anywhere.
 */
export function isNewConversation(request: PlacementRequest): boolean {
  if (request.opensConversation === true) return true;
  if (request.promptTokens === undefined) return false;
  for (const held of request.cachedTokens?.values() ?? []) if (holdsConversation(request, held)) return false;
  return true;
}

/**
 * A new placement's cost (a session being placed, a request without a session): kvCostTokens, plus, for a new
 * conversation (isNewConversation), the tokens it would evict (kvDisplacedTokens), each weighed as one token of
 * prefill: the conversations the engine holds compute them again at their next turn, and the new conversation
 * goes on evicting them as it grows. Without it, a new conversation goes to the engine holding the shared system
 * prompt however full that engine is: with sessions arriving one at a time (the request-count load bound never
 * bites), the kvevents study's quick plan put all four on one engine whose cache holds under three, and three
 * later turns recomputed ~10k tokens each (docs/kv-events.md, fourth round). A continued conversation is ranked
 * by kvCostTokens alone: what it holds is known, what it would evict may be finished sessions'.
 */
export function kvPlaceCostTokens(
  request: PlacementRequest,
  candidate: PlacementCandidate,
  newConversation: boolean = isNewConversation(request),
): number {
  const cost = kvCostTokens(request, candidate);
  return newConversation ? cost + kvDisplacedTokens(request, candidate) : cost;
}

/** (max - cost) / (max - min) over the candidates: 1 for the cheapest, 0 for the dearest, 1 for all when equal. */
function normalisedCosts(costs: readonly number[]): number[] {
  let min = Infinity;
  let max = -Infinity;
  for (const cost of costs) {
    if (cost < min) min = cost;
    if (cost > max) max = cost;
  }
  return costs.map((cost) => (max === min ? 1 : (max - cost) / (max - min)));
}

/**
 * The cheapest engine scores 1, the dearest 0, all 1 when equal (the tie-break scorers then decide). Engines
 * without events count as holding nothing and having no work.
 */
export const kvCostScorer: Scorer = (request, _state, candidates) =>
  normalisedCosts(candidates.map((c) => kvCostTokens(request, c)));

/** kvCostScorer for a new placement: its cost counts what it would evict (kvPlaceCostTokens). */
export const kvPlaceCostScorer: Scorer = (request, _state, candidates) => {
  const newConversation = isNewConversation(request);
  return normalisedCosts(candidates.map((c) => kvPlaceCostTokens(request, c, newConversation)));
};
