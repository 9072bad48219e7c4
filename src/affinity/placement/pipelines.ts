// The pipelines the placement decision runs, each a list of the stages in this folder.
import { boundedLoadFilter } from "./filter-bounded-load.js";
import { eligibleFilter } from "./filter-eligible.js";
import { freeSlotFilter } from "./filter-free-slot.js";
import { kvBoundedLoadFilter } from "./filter-kv-bounded-load.js";
import { maxScorePicker } from "./pick-max-score.js";
import { freeSlotScorer } from "./score-free-slot.js";
import { kvCostScorer, kvPlaceCostScorer } from "./score-kv-cost.js";
import { leastLoadScorer } from "./score-least-load.js";
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
 * The KV cost first (prompt tokens to compute plus prefill work ahead, src/affinity/placement/score-kv-cost.ts);
 * among engines of equal cost the least loaded, then the key's rendezvous order. The tie-breaks add at most
 * 1e-6 to a score, less than one block's (16 tokens') cost difference over any spread of costs below 16M
 * tokens, so they only ever break ties.
 */
const byKvCost = [
  { scorer: kvCostScorer, weight: 1 },
  { scorer: leastLoadScorer, weight: 1e-6 },
  { scorer: rendezvousScorer, weight: 1e-9 },
] as const;

/** byKvCost with a new placement's cost: what it would evict counts (score-kv-cost.ts, kvPlaceCostTokens). */
const byKvPlaceCost = [{ scorer: kvPlaceCostScorer, weight: 1 }, byKvCost[1], byKvCost[2]] as const;

/**
 * Where a new placement goes by what engines hold (a session being placed, a request without a session): the
 * cheapest engine within the load bound, or holding the conversation (filter-kv-bounded-load.ts), counting
 * what it would evict there.
 */
export const kvPlacePipeline: Pipeline = {
  filters: [eligibleFilter, kvBoundedLoadFilter],
  scorers: byKvPlaceCost,
  picker: maxScorePicker,
};

/**
 * Where a bound session may move by what engines hold: the cheapest engine within the load bound or holding its
 * conversation (half its prompt or more; filter-kv-bounded-load.ts). The bound is waived where the conversation
 * is held: the cost already weighs the work queued there in the same unit as the cache it saves, where the bound
 * counts requests, so it would keep a 150k-token conversation from its cache because that engine runs one more
 * short request. An engine holding less (a shared prefix) takes it only within the bound, as every other
 * placement's target does.
 */
export const kvCostPipeline: Pipeline = {
  filters: [eligibleFilter, kvBoundedLoadFilter],
  scorers: byKvCost,
  picker: maxScorePicker,
};

/** A spill by what engines hold: the cheapest engine free now, within the load bound or holding the conversation. */
export const kvSpillPipeline: Pipeline = {
  filters: [eligibleFilter, freeSlotFilter, kvBoundedLoadFilter],
  scorers: byKvCost,
  picker: maxScorePicker,
};
