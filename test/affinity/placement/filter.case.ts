// The contract every placement Filter keeps, run by each filter's test (Hono's common.case.test.ts style).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { Filter, PlacementRequest } from "../../../src/affinity/placement/types.js";
import { candidatesArb, keyArb, loadFactorArb, stateOf } from "./arbitraries.js";

export function filterContract(name: string, filter: Filter): void {
  describe(`Filter contract: ${name}`, () => {
    const request = (exclude: string[]): PlacementRequest => ({
      tier: "t",
      sessionId: "s",
      prefixKey: undefined,
      exclude: new Set(exclude),
    });

    it("keeps a subsequence of its input, in order, and never mutates it", () => {
      fc.assert(
        fc.property(candidatesArb(), keyArb, loadFactorArb, fc.nat(), (list, key, c, excludeIndex) => {
          const snapshot = JSON.stringify(list);
          const exclude = [list[excludeIndex % list.length]!.id];
          const kept = filter(request(exclude), stateOf(key, list, c), list);
          expect(JSON.stringify(list)).toBe(snapshot);
          let at = 0;
          for (const item of kept) {
            while (at < list.length && list[at] !== item) at++;
            expect(at).toBeLessThan(list.length); // found, after the previous one
            at++;
          }
        }),
      );
    });

    it("is pure: the same input gives the same output", () => {
      fc.assert(
        fc.property(candidatesArb(), keyArb, loadFactorArb, (list, key, c) => {
          const state = stateOf(key, list, c);
          expect(filter(request([]), state, list)).toEqual(filter(request([]), state, list));
        }),
      );
    });

    it("keeps nothing of nothing", () => {
      expect(filter(request([]), stateOf({ hi: 1, lo: 2 }, []), [])).toEqual([]);
    });

    it("decides each candidate on its own: filtering a sublist gives the sublist of the result", () => {
      fc.assert(
        fc.property(candidatesArb(), keyArb, loadFactorArb, (list, key, c) => {
          // The state (tier totals) is the whole list's in both calls, as in one decision.
          const state = stateOf(key, list, c);
          const whole = filter(request([]), state, list);
          const half = list.filter((_, i) => i % 2 === 0);
          expect(filter(request([]), state, half)).toEqual(whole.filter((x) => half.includes(x)));
        }),
      );
    });
  });
}
