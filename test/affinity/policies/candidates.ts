// Placement candidates for the policy tests: idle and up unless told otherwise.
import { hashString } from "../../../src/affinity/hash.js";
import type { EngineSignals, PlacementCandidate } from "../../../src/affinity/placement/types.js";

export function candidate(
  id: string,
  over: Partial<Omit<PlacementCandidate, "id" | "idHash">> = {},
): PlacementCandidate {
  return {
    id,
    idHash: hashString(id),
    weight: 1,
    state: "up",
    inflight: 0,
    queued: 0,
    maxInflight: 8,
    engineLoad: undefined,
    ...over,
  };
}

export function reading(over: Partial<EngineSignals>): EngineSignals {
  return { runningRequests: 0, waitingRequests: 0, kvCacheUsage: 0, readAtMs: 0, ...over };
}
