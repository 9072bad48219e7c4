// Filter: backends whose load after taking this request stays within the bound (consistent hashing with bounded loads).
import { loadBound, loadOf } from "./load.js";
import type { Filter } from "./types.js";

/**
 * Mirrokni, Thorup and Zadimoghaddam (SODA 2018): a backend may take the request only if its load plus
 * this request is at most ceil(c x its weighted share of the tier's load, this request included). With
 * c >= 1 some up backend always qualifies, so a rendezvous ranking walked under this filter always ends.
 * loadFactor 0 turns the filter off (every candidate passes).
 */
export const boundedLoadFilter: Filter = (_request, state, candidates) =>
  state.loadFactor <= 0 ? candidates : candidates.filter((c) => loadOf(c) + 1 <= loadBound(c, state));
