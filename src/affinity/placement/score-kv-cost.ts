// Scorer: the cheapest engine by KV events: prompt tokens it must compute (weighted) plus the prefill work ahead there.
import type { PlacementCandidate, PlacementRequest, Scorer } from "./types.js";

/**
 * How much a prompt token the engine must compute weighs against a token of prefill already queued there (Dynamo's
 * overlap weight). 2, not 1: a token recomputed delays this request and also every request queued behind it on
 * that engine, where work already queued delays only this one. At 1 the cost is this request's own time to first
 * token, and a burst of calls sharing a short prefix scatters to idle engines, each prefilling the prefix again.
 */
export const KV_PREFILL_WEIGHT = 2;

/**
 * A request's cost on an engine, in prompt tokens: KV_PREFILL_WEIGHT x what it must prefill there (the prompt less
 * the prefix the engine holds) plus what the engine must prefill first for requests already sent to it, as
 * Dynamo's KV router weighs prefill blocks against active blocks. The prompt's length is the same on every engine,
 * so it is left out: active - weight x held ranks engines exactly as the cost does.
 */
export function kvCostTokens(request: PlacementRequest, candidate: PlacementCandidate): number {
  const held = request.cachedTokens?.get(candidate.id) ?? 0;
  const active = request.activeTokens?.get(candidate.id) ?? 0;
  return active - KV_PREFILL_WEIGHT * held;
}

/**
 * (max - cost) / (max - min) over the candidates: 1 for the cheapest, 0 for the dearest, 1 for all when equal
 * (the tie-break scorers then decide). Engines without events count as holding nothing and having no work.
 */
export const kvCostScorer: Scorer = (request, _state, candidates) => {
  const costs = candidates.map((c) => kvCostTokens(request, c));
  let min = Infinity;
  let max = -Infinity;
  for (const cost of costs) {
    if (cost < min) min = cost;
    if (cost > max) max = cost;
  }
  return costs.map((cost) => (max === min ? 1 : (max - cost) / (max - min)));
};
