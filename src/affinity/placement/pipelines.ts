// The pipelines the placement decision runs, each a list of the stages in this folder.
import { boundedLoadFilter } from "./filter-bounded-load.js";
import { eligibleFilter } from "./filter-eligible.js";
import { freeSlotFilter } from "./filter-free-slot.js";
import { maxScorePicker } from "./pick-max-score.js";
import { freeSlotScorer } from "./score-free-slot.js";
import { kvPrefixScorer } from "./score-kv-prefix.js";
import { rendezvousScorer } from "./score-rendezvous.js";
import type { Pipeline } from "./types.js";

const byRendezvous = [{ scorer: rendezvousScorer, weight: 1 }] as const;

/** Bounded-load rendezvous: the first backend of the key's ranking within the load bound (a prefix request when no backend within the bound has a free slot). */
export const boundedRendezvousPipeline: Pipeline = {
  filters: [eligibleFilter, boundedLoadFilter],
  scorers: byRendezvous,
  picker: maxScorePicker,
};

/**
 * Where a session is placed (new, rebinding, failing over): the first backend of its ranking within the bound
 * that can start the request now, else the first within the bound. The session has no cache on any engine
 * yet, so a free slot further down its ranking costs it nothing, while a full winner would make it wait
 * behind whatever fills that engine (measured: docs/load-study.md, "Placement under hot spots").
 */
export const sessionPlacementPipeline: Pipeline = {
  filters: [eligibleFilter, boundedLoadFilter],
  scorers: [
    { scorer: freeSlotScorer, weight: 1 },
    { scorer: rendezvousScorer, weight: 1 },
  ],
  picker: maxScorePicker,
};

/** Where a request goes when its home (a bound session's pinned backend, a prefix's winner) is full: the first of its ranking free now and within the bound. */
export const spillPipeline: Pipeline = {
  filters: [eligibleFilter, freeSlotFilter, boundedLoadFilter],
  scorers: byRendezvous,
  picker: maxScorePicker,
};

/**
 * The prompt's cached prefix first, the ranking only among engines holding as much (its tiny weight breaks
 * ties and nothing else): where engines publish KV events and one of them holds some of the prompt.
 */
const byCachedPrefix = [
  { scorer: kvPrefixScorer, weight: 1 },
  { scorer: rendezvousScorer, weight: 1e-6 },
] as const;

/** Where a request goes by what engines hold: the longest cached prefix within the load bound. */
export const kvPrefixPipeline: Pipeline = {
  filters: [eligibleFilter, boundedLoadFilter],
  scorers: byCachedPrefix,
  picker: maxScorePicker,
};

/** A spill by what engines hold: the engine free now and within the bound that holds most of the prompt. */
export const kvSpillPipeline: Pipeline = {
  filters: [eligibleFilter, freeSlotFilter, boundedLoadFilter],
  scorers: byCachedPrefix,
  picker: maxScorePicker,
};
