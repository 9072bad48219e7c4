// Scorer: matched leading blocks / the prompt's blocks, per candidate (llm-d's prefix-cache scorer).
import type { Scorer } from "../placement/types.js";

/** A scorer over one decision's matches (BlockIndex.longestPrefix); 0 for all when the prompt has no block. */
export function prefixCacheScorer(matched: ReadonlyMap<string, number>, totalBlocks: number): Scorer {
  return (_request, _state, candidates) =>
    candidates.map((c) => (totalBlocks === 0 ? 0 : (matched.get(c.id) ?? 0) / totalBlocks));
}
