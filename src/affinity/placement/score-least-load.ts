// Scorer: fewer requests in flight and queued at this gateway score higher, min-max normalised over the candidates.
import { loadOf } from "./load.js";
import type { Scorer } from "./types.js";

/**
 * (max - load) / (max - min), load = in flight + queued: 1 for the least loaded, 0 for the most, 1 for all when
 * equal. A tie-break under the KV cost, so engines holding the same prefix with the same work ahead still spread.
 */
export const leastLoadScorer: Scorer = (_request, _state, candidates) => {
  const loads = candidates.map(loadOf);
  let min = Infinity;
  let max = -Infinity;
  for (const load of loads) {
    if (load < min) min = load;
    if (load > max) max = load;
  }
  return loads.map((load) => (max === min ? 1 : (max - load) / (max - min)));
};
