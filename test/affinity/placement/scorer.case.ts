// The contract every placement Scorer keeps, run by each scorer's test (Hono's common.case.test.ts style).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { PlacementRequest, Scorer } from "../../../src/affinity/placement/types.js";
import { candidatesArb, keyArb, stateOf } from "./arbitraries.js";

const REQUEST: PlacementRequest = { tier: "t", sessionId: "s", prefixKey: undefined, exclude: new Set() };

export function scorerContract(name: string, scorer: Scorer): void {
  describe(`Scorer contract: ${name}`, () => {
    it("gives one finite score in [0, 1] per candidate", () => {
      fc.assert(
        fc.property(candidatesArb({ weighted: true }), keyArb, (list, key) => {
          const scores = scorer(REQUEST, stateOf(key, list), list);
          expect(scores).toHaveLength(list.length);
          for (const score of scores) {
            expect(Number.isFinite(score)).toBe(true);
            expect(score).toBeGreaterThanOrEqual(0);
            expect(score).toBeLessThanOrEqual(1);
          }
        }),
      );
    });

    it("scores a candidate the same wherever it stands in the list", () => {
      fc.assert(
        fc.property(candidatesArb({ weighted: true }), keyArb, fc.nat(), (list, key, rotation) => {
          const state = stateOf(key, list);
          const r = rotation % list.length;
          const rotated = [...list.slice(r), ...list.slice(0, r)];
          const byId = new Map(list.map((c, i) => [c.id, scorer(REQUEST, state, list)[i]]));
          const again = scorer(REQUEST, state, rotated);
          rotated.forEach((c, i) => expect(again[i]).toBe(byId.get(c.id)));
        }),
      );
    });

    it("never mutates its input", () => {
      fc.assert(
        fc.property(candidatesArb(), keyArb, (list, key) => {
          const snapshot = JSON.stringify(list);
          scorer(REQUEST, stateOf(key, list), list);
          expect(JSON.stringify(list)).toBe(snapshot);
        }),
      );
    });
  });
}
