// HeldContentKeys against the two Maps it replaced (a count per key; an insertion-ordered Map moved by delete then
// set): same keys, order, parents and counts through any sequence of adds, releases, touches and clears, past its
// first growth and with freed slots reused.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { HeldContentKeys } from "../../src/kv-events/held-content-keys.js";

type Op =
  | { kind: "add"; key: number; parent: number }
  | { kind: "release"; key: number }
  | { kind: "touch"; key: number }
  | { kind: "clear" };

/** Keys from a small range (so operations meet the same keys), doubles above 2^32 as content keys are. */
const key = fc.integer({ min: 0, max: 1500 }).map((k) => 2 ** 40 + k * 7919);
const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({ kind: fc.constant("add" as const), key, parent: fc.double({ noNaN: true }) }),
  },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("release" as const), key }) },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant("touch" as const), key }) },
  { weight: 1, arbitrary: fc.constant({ kind: "clear" as const }) },
);

describe("HeldContentKeys", () => {
  it("keeps the keys, order, parents and counts the two Maps kept", () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 4000 }), (ops) => {
        const held = new HeldContentKeys();
        const order = new Map<number, number>(); // key -> parent, least recently used first
        const counts = new Map<number, number>();
        for (const o of ops) {
          if (o.kind === "add") {
            held.add(o.key, o.parent);
            counts.set(o.key, (counts.get(o.key) ?? 0) + 1);
            order.delete(o.key);
            order.set(o.key, o.parent);
          } else if (o.kind === "release") {
            held.release(o.key);
            const count = (counts.get(o.key) ?? 1) - 1;
            if (count > 0) counts.set(o.key, count);
            else {
              counts.delete(o.key);
              order.delete(o.key);
            }
          } else if (o.kind === "touch") {
            const parent = order.get(o.key);
            expect(held.touch(o.key)).toBe(parent);
            if (parent !== undefined) {
              order.delete(o.key);
              order.set(o.key, parent);
            }
          } else {
            held.clear();
            order.clear();
            counts.clear();
          }
        }
        expect(held.size).toBe(order.size);
        expect([...held.leastRecentFirst()]).toEqual([...order.keys()]);
        for (const [k, parent] of order) {
          expect(held.has(k)).toBe(true);
          expect(held.get(k)).toBe(parent);
        }
      }),
      { numRuns: 60 },
    );
  });

  it("grows past its first capacity, reuses freed slots, and keeps a key until its last copy goes", () => {
    const held = new HeldContentKeys();
    for (let k = 0; k < 5000; k++) held.add(k, k - 1);
    for (let k = 0; k < 5000; k += 2) held.release(k);
    for (let k = 10_000; k < 12_500; k++) held.add(k, 0);
    expect(held.size).toBe(5000);
    const order = [...held.leastRecentFirst()];
    expect(order.slice(0, 3)).toEqual([1, 3, 5]);
    expect(order.at(-1)).toBe(12_499);
    expect(held.get(4999)).toBe(4998);
    expect(held.has(4998)).toBe(false);
    held.add(1, 0); // a second copy, now the most recent
    held.release(1);
    expect(held.has(1)).toBe(true);
    expect([...held.leastRecentFirst()].at(-1)).toBe(1);
    held.release(1);
    expect(held.has(1)).toBe(false);
  });
});
