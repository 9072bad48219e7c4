// The pipelines the scheduler runs, each a list of the stages in this folder.
import { boundedLoadFilter } from "./filter-bounded-load.js";
import { eligibleFilter } from "./filter-eligible.js";
import { freeSlotFilter } from "./filter-free-slot.js";
import { maxScorePicker } from "./pick-max-score.js";
import { rendezvousScorer } from "./score-rendezvous.js";
import type { Pipeline } from "./types.js";

const byRendezvous = [{ scorer: rendezvousScorer, weight: 1 }] as const;

/** Plain rendezvous: the key's winner among the eligible backends (today's placement; load_factor 0). */
export const rendezvousPipeline: Pipeline = {
  filters: [eligibleFilter],
  scorers: byRendezvous,
  picker: maxScorePicker,
};

/** Bounded-load rendezvous: the first backend of the key's ranking within the load bound (new sessions, prefixes). */
export const boundedRendezvousPipeline: Pipeline = {
  filters: [eligibleFilter, boundedLoadFilter],
  scorers: byRendezvous,
  picker: maxScorePicker,
};

/** Where a bound session's request goes when its pinned backend is full: the first of its ranking free now and within the bound. */
export const spillPipeline: Pipeline = {
  filters: [eligibleFilter, freeSlotFilter, boundedLoadFilter],
  scorers: byRendezvous,
  picker: maxScorePicker,
};
