// Scorer: 1 for a backend that can start the request now (a free slot, nobody queued), 0 for one where it would queue.
import { hasFreeSlot } from "./load.js";
import type { Scorer } from "./types.js";

/**
 * Weighted 1 next to the rendezvous scorer (whose scores lie in (0, 1)), it puts every backend that can start
 * the request now ahead of every backend where it would wait, and keeps the ranking's order within each group:
 * a placement takes the first backend of its ranking within the bound that has a free slot, and only when
 * none has, the first within the bound (where it queues, as before).
 */
export const freeSlotScorer: Scorer = (_request, _state, candidates) =>
  candidates.map((c) => (hasFreeSlot(c) ? 1 : 0));
