// Scorer: the share of the prompt each engine holds in its prefix cache, as its KV events tell (src/kv-events).
import type { Scorer } from "./types.js";

/**
 * Tokens held / the most any candidate holds: 1 for the engine holding the longest prefix, 0 for one holding
 * nothing or publishing no events. All 0 when nobody holds any of it (the other scorers decide then).
 */
export const kvPrefixScorer: Scorer = (request, _state, candidates) => {
  const held = request.cachedTokens;
  if (held === undefined) return candidates.map(() => 0);
  let most = 0;
  for (const c of candidates) most = Math.max(most, held.get(c.id) ?? 0);
  return candidates.map((c) => (most === 0 ? 0 : (held.get(c.id) ?? 0) / most));
};
