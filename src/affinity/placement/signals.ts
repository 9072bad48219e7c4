// The engine's own reading of a candidate, if it is recent enough to place by.
import type { EngineSignals, PlacementCandidate, PlacementState } from "./types.js";

/** The reading, or undefined when there is none or it is older than the state's max age. */
export function freshSignals(
  candidate: PlacementCandidate,
  state: PlacementState,
): EngineSignals | undefined {
  const signals = candidate.engineLoad;
  if (signals === undefined || state.nowMs - signals.readAtMs > state.engineSignalMaxAgeMs) return undefined;
  return signals;
}
