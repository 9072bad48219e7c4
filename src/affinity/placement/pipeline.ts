// Runs one placement pipeline: every filter in order, then the weighted, clamped scores, then the picker.
import type { PlacementCandidate, PlacementRequest, PlacementState, Pipeline } from "./types.js";

/** Scores outside [0, 1] (or NaN) from a scorer are clamped, so no scorer can outweigh its configured weight. */
export function clampScore(score: number): number {
  if (!(score > 0)) return 0; // also NaN
  return score > 1 ? 1 : score;
}

/** The chosen candidate, or undefined when the filters leave none. */
export function runPipeline<C extends PlacementCandidate>(
  pipeline: Pipeline,
  request: PlacementRequest,
  state: PlacementState,
  candidates: readonly C[],
): C | undefined {
  let remaining = candidates;
  for (const filter of pipeline.filters) {
    remaining = filter(request, state, remaining);
    if (remaining.length === 0) return undefined;
  }
  const totals = new Array<number>(remaining.length).fill(0);
  for (const { scorer, weight } of pipeline.scorers) {
    const scores = scorer(request, state, remaining);
    for (let i = 0; i < remaining.length; i++) totals[i]! += weight * clampScore(scores[i] ?? 0);
  }
  return pipeline.picker(request, state, remaining, totals);
}
