// Scorer: free KV-cache scores higher: 1 - the engine's KV-cache usage (llm-d's kv-cache-utilization scorer).
import { freshSignals } from "./signals.js";
import type { Scorer } from "./types.js";

/** Unknown usage (no reading, a stale one, or an engine that does not export it) scores a neutral 0.5. */
export const UNKNOWN_KV_SCORE = 0.5;

export const kvCacheScorer: Scorer = (_request, state, candidates) =>
  candidates.map((c) => {
    const usage = freshSignals(c, state)?.kvCacheUsage;
    return usage === undefined || !Number.isFinite(usage) ? UNKNOWN_KV_SCORE : 1 - usage;
  });
