// Filter: the load bound for a request placed by KV events, waived on engines holding the conversation itself.
import { boundedLoadFilter } from "./filter-bounded-load.js";
import { holdsConversation } from "./score-kv-cost.js";
import { loadBound, loadOf } from "./load.js";
import type { Filter, PlacementCandidate, PlacementRequest, PlacementState } from "./types.js";

/**
 * Backends within the load bound (filter-bounded-load.ts), and any backend holding the request's conversation
 * (holdsConversation: a continued conversation, at least half of it held there). A continued conversation keeps
 * its engine however loaded it is: the KV cost weighs that engine's queue against its cache. A new conversation
 * finds at most an opening others share (a system prompt, a sub-agent's instructions) anywhere, worth a few seconds
 * of prefill once, while the engine it lands on serves every later turn of it, so it stays within the bound even
 * where the opening is most of its prompt. Measured without the bound, the engines holding the shared system prompt
 * first took nearly every new session; with the bound waived for a sub-agent's first call (its 6,000-token
 * instructions are nearly all of it), a burst's sub-agents all went to the engine holding the instructions and
 * their later calls queued there (docs/kv-events.md, ninth round).
 */
export const kvBoundedLoadFilter: Filter = (request, state, candidates) => {
  const within = fleetBoundedLoad(request, state, candidates);
  if (within.length === candidates.length) return within;
  return candidates.filter(
    (c) => within.includes(c) || holdsConversation(request, request.cachedTokens?.get(c.id) ?? 0),
  );
};

/**
 * The load bound over the fleet's requests where the replicas share their sends: each engine's load is this
 * replica's requests there plus the other replicas' (request.otherReplicasLoad), and the tier's load likewise. With
 * a replica's own counts only, each of three replicas saw a third of an engine's requests, and a burst's siblings
 * that other replicas had placed on the engine holding their instructions drew the rest there too (docs/kv-events.md,
 * ninth round). Without shared sends, the bound of filter-bounded-load.ts as it is.
 */
function fleetBoundedLoad<C extends PlacementCandidate>(
  request: PlacementRequest,
  state: PlacementState,
  candidates: readonly C[],
): readonly C[] {
  const others = request.otherReplicasLoad;
  if (others === undefined || state.loadFactor <= 0) return boundedLoadFilter(request, state, candidates);
  let otherTotal = 0;
  for (const count of others.values()) otherTotal += count;
  if (otherTotal === 0) return boundedLoadFilter(request, state, candidates);
  const fleet: PlacementState = { ...state, tierLoad: state.tierLoad + otherTotal };
  return candidates.filter((c) => loadOf(c) + (others.get(c.id) ?? 0) + 1 <= loadBound(c, fleet));
}
