// Scorer: shorter queues score higher, min-max normalised over the candidates (llm-d's queue scorer).
import { freshSignals } from "./signals.js";
import type { Scorer } from "./types.js";

/**
 * Queue = waiting at the gateway for the backend plus waiting inside the engine (when its reading is
 * fresh). Score (max - q) / (max - min): 1 for the shortest queue, 0 for the longest, 1 for all when equal.
 */
export const queueScorer: Scorer = (_request, state, candidates) => {
  const queues = candidates.map((c) => c.queued + (freshSignals(c, state)?.waitingRequests ?? 0));
  let min = Infinity;
  let max = -Infinity;
  for (const q of queues) {
    if (q < min) min = q;
    if (q > max) max = q;
  }
  return queues.map((q) => (max === min ? 1 : (max - q) / (max - min)));
};
