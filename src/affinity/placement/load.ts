// Load as placement counts it, and the per-decision state that the load bound needs.
import type { Hash64 } from "../hash.js";
import type { PlacementCandidate, PlacementState } from "./types.js";

/**
 * Requests the gateway has given the backend: in flight, queued at the gateway for it, and placed there while
 * their binding is written (PlacementCandidate.placing). The engine's own waiting queue is not added: every
 * request of this gateway that waits in the engine is already in flight here, so adding it would count it twice
 * (docs/affinity.md).
 */
export function loadOf(candidate: PlacementCandidate): number {
  return candidate.inflight + candidate.queued + (candidate.placing ?? 0);
}

/**
 * The backend can start the request now: fewer than max_inflight in flight (the flow dispatcher's rule). Who
 * waits for a backend that has a free slot is held by its own agent's cap (admission.max_inflight_per_agent):
 * the dispatcher starts every other waiting request the moment a slot frees, and grants a newcomer a free
 * slot at once. Such waiters still count as load (loadOf) but do not make the slot taken.
 */
export function hasFreeSlot(candidate: PlacementCandidate): boolean {
  return candidate.inflight < candidate.maxInflight;
}

/**
 * How far below an integer a quotient may land by rounding alone and still count as that integer: c and the
 * weights are decimals, which binary floating point holds inexactly (1.1 x 10 is 11.000000000000002, whose
 * ceiling would be 12). A handful of roundings err by about 1e-16 of the value; a true fraction of a bound
 * built from config decimals and request counts is far larger than 1e-12 of it.
 */
const ROUNDING_SLACK = 1e-12;

/**
 * The most load backend `candidate` may carry after taking one more request:
 * ceil(c * w_i / W * (L + 1)), with W and L the weight and load of the tier's up backends. With equal
 * weights that is ceil(c * mean load, this request included).
 */
export function loadBound(candidate: PlacementCandidate, state: PlacementState): number {
  if (state.tierWeight <= 0) return Infinity;
  const share = (state.loadFactor * candidate.weight * (state.tierLoad + 1)) / state.tierWeight;
  return Math.ceil(share - share * ROUNDING_SLACK);
}

/** Builds the state of one decision: sums load and weight over the tier's up backends. */
export function placementState(
  key: Hash64,
  candidates: readonly PlacementCandidate[],
  settings: { loadFactor: number; nowMs: number; engineSignalMaxAgeMs: number },
): PlacementState {
  let tierLoad = 0;
  let tierWeight = 0;
  for (const candidate of candidates) {
    if (candidate.state !== "up") continue;
    tierLoad += loadOf(candidate);
    tierWeight += candidate.weight;
  }
  return {
    key,
    loadFactor: settings.loadFactor,
    tierLoad,
    tierWeight,
    nowMs: settings.nowMs,
    engineSignalMaxAgeMs: settings.engineSignalMaxAgeMs,
  };
}

/**
 * The counts of `perBackend` on the tier's up backends only: the set placementState sums its load over. The other
 * replicas' requests on an engine since taken down end or expire; added to the tier's load, they would raise every
 * up engine's bound (filter-kv-bounded-load.ts).
 */
export function onUpBackends(
  perBackend: ReadonlyMap<string, number> | undefined,
  candidates: readonly PlacementCandidate[],
): ReadonlyMap<string, number> | undefined {
  if (perBackend === undefined) return undefined;
  const up = new Map<string, number>();
  for (const candidate of candidates) {
    const count = perBackend.get(candidate.id);
    if (count !== undefined && candidate.state === "up") up.set(candidate.id, count);
  }
  return up;
}
