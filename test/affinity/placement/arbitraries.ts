// fast-check generators of placement inputs shared by the stage and scheduler property tests.
import fc from "fast-check";
import { hashString, type Hash64 } from "../../../src/affinity/hash.js";
import type { BackendState, EngineSignals, PlacementState } from "../../../src/affinity/placement/types.js";
import { placementState } from "../../../src/affinity/placement/load.js";
import { candidate, type TestCandidate } from "../helpers.js";

export const stateArb = fc.constantFrom<BackendState>("up", "up", "up", "draining", "down");

const signalsArb: fc.Arbitrary<EngineSignals | undefined> = fc.option(
  fc.record({
    runningRequests: fc.option(fc.nat({ max: 64 }), { nil: undefined }),
    waitingRequests: fc.option(fc.nat({ max: 64 }), { nil: undefined }),
    kvCacheUsage: fc.option(fc.double({ min: 0, max: 1, noNaN: true }), { nil: undefined }),
    readAtMs: fc.integer({ min: 0, max: 10_000 }),
  }),
  { nil: undefined },
);

/** 1-8 candidates with distinct ids, random states, loads, slots, weights and engine readings. */
export const candidatesArb = (options: { weighted?: boolean; allUp?: boolean } = {}) =>
  fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9-]{0,7}$/), { minLength: 1, maxLength: 8 }).chain((ids) =>
    fc.tuple(
      ...ids.map((id) =>
        fc
          .record({
            state: options.allUp ? fc.constant<BackendState>("up") : stateArb,
            inflight: fc.nat({ max: 12 }),
            queued: fc.nat({ max: 4 }),
            maxInflight: fc.integer({ min: 1, max: 12 }),
            weight: options.weighted ? fc.constantFrom(1, 2, 3, 0.5) : fc.constant(1),
            engineLoad: signalsArb,
          })
          .map((fields): TestCandidate => candidate(id, fields)),
      ),
    ),
  );

export const keyArb: fc.Arbitrary<Hash64> = fc.string({ minLength: 1, maxLength: 40 }).map(hashString);

/** Load factors in hundredths, so that the exact bound below can be computed in integers. */
const LOAD_FACTOR_HUNDREDTHS = [100, 105, 110, 115, 125, 130, 150, 175, 200, 300] as const;
export const loadFactorArb = fc.constantFrom(...LOAD_FACTOR_HUNDREDTHS.map((h) => h / 100));

/**
 * The bound, ceil(c x w_i / W x (L + 1)), computed apart from the code under test: in integers, with c
 * in hundredths and weights in halves (every value the generators make), so no rounding can hide an error.
 */
export function exactLoadBound(
  chosen: TestCandidate,
  list: readonly TestCandidate[],
  loadFactor: number,
): number {
  const up = list.filter((x) => x.state === "up");
  const halves = (weight: number) => Math.round(weight * 2);
  const tierHalves = up.reduce((sum, x) => sum + halves(x.weight), 0);
  const tierLoad = up.reduce((sum, x) => sum + x.inflight + x.queued, 0);
  const numerator = Math.round(loadFactor * 100) * halves(chosen.weight) * (tierLoad + 1);
  const denominator = 100 * tierHalves;
  return Math.floor((numerator + denominator - 1) / denominator);
}

export function stateOf(
  key: Hash64,
  list: readonly TestCandidate[],
  loadFactor = 1.25,
  nowMs = 10_000,
): PlacementState {
  return placementState(key, list, { loadFactor, nowMs, engineSignalMaxAgeMs: 5_000 });
}
