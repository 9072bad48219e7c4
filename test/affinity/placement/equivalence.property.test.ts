// At load_factor 0 the pipeline scheduler decides exactly as the seed's did; under uniform load, at any factor.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { createBalancer } from "../../../src/affinity/balancers.js";
import { hashString } from "../../../src/affinity/hash.js";
import { MemoryBindingStore } from "../../../src/affinity/memory-bindings.js";
import { PlacementService } from "../../../src/affinity/placement-service.js";
import { StickyTable } from "../../../src/affinity/sticky-table.js";
import { ManualClock } from "../../../src/core/clock.js";
import { SeededRandom } from "../../../src/core/random.js";
import { ReferenceScheduler } from "../reference-scheduler.js";
import { candidate, CountingRecorder, TEST_HASH_KEY, type TestCandidate } from "../helpers.js";

type Op =
  | { kind: "select"; session: number | undefined; exclude: number }
  | { kind: "load"; backend: number; inflight: number; queued: number }
  | { kind: "state"; backend: number; state: "up" | "down" | "draining" }
  | { kind: "fail"; session: number; backend: number }
  | { kind: "advance"; ms: number };

const opArb = (uniform: boolean): fc.Arbitrary<Op> =>
  fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant("select" as const),
        session: fc.option(fc.nat({ max: 11 }), { nil: undefined }),
        exclude: fc.nat({ max: 15 }),
      }),
    },
    {
      weight: uniform ? 0 : 2,
      arbitrary: fc.record({
        kind: fc.constant("load" as const),
        backend: fc.nat({ max: 3 }),
        inflight: fc.nat({ max: 10 }),
        queued: fc.nat({ max: 3 }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant("state" as const),
        backend: fc.nat({ max: 3 }),
        state: fc.constantFrom("up" as const, "down" as const, "draining" as const),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant("fail" as const),
        session: fc.nat({ max: 11 }),
        backend: fc.nat({ max: 3 }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({
        kind: fc.constant("advance" as const),
        ms: fc.integer({ min: 0, max: 40_000 }),
      }),
    },
  );

async function replay(
  ops: readonly Op[],
  weights: readonly number[],
  loadFactor: number,
  ttlSeconds: number,
): Promise<void> {
  const list: TestCandidate[] = weights.map((weight, i) => candidate(`b${i}`, { weight, maxInflight: 4 }));
  const clock = new ManualClock(1_000);
  const oldRecorder = new CountingRecorder();
  const newRecorder = new CountingRecorder();
  const reference = new ReferenceScheduler({
    store: new StickyTable(64, TEST_HASH_KEY),
    clock,
    balancer: createBalancer("least_inflight", new SeededRandom(3)),
    recorder: oldRecorder,
    stickyTtlSeconds: ttlSeconds,
  });
  const subject = new PlacementService({
    store: new MemoryBindingStore(new StickyTable(64, TEST_HASH_KEY)),
    clock,
    balancer: createBalancer("least_inflight", new SeededRandom(3)),
    recorder: newRecorder,
    stickyTtlMs: ttlSeconds * 1000,
    loadFactor,
    sessionless: "balancer",
  });
  const sessionId = (n: number | undefined) => (n === undefined ? undefined : `session-${n}`);
  for (const op of ops) {
    switch (op.kind) {
      case "select": {
        const exclude = new Set(list.filter((_, i) => (op.exclude >> i) & 1).map((c) => c.id));
        const id = sessionId(op.session);
        const hints = { prefixKey: hashString(`template-${op.session ?? 0}`) };
        const expected = reference.selectBackend(id, "t", list, exclude);
        const actual = await subject.place(id, "t", list, exclude, hints);
        expect(actual && { id: actual.backend.id, hit: actual.affinityHit, reason: actual.reason }).toEqual(
          expected && { id: expected.backend.id, hit: expected.affinityHit, reason: expected.reason },
        );
        break;
      }
      case "load":
        list[op.backend]!.inflight = op.inflight;
        list[op.backend]!.queued = op.queued;
        break;
      case "state": {
        const target = list[op.backend]!;
        const was = target.state;
        target.state = op.state;
        if (op.state === "down" && was !== "down") {
          expect(await subject.onBackendDown(target.id, "t")).toBe(reference.onBackendDown(target.id, "t"));
        } else if (op.state === "up" && was === "down") {
          expect(await subject.onBackendUp(target.id, list)).toBe(reference.onBackendUp(target.id, list));
        }
        break;
      }
      case "fail":
        reference.onAttemptFailed(sessionId(op.session), "t", list[op.backend]!.id);
        await subject.onAttemptFailed(sessionId(op.session), "t", list[op.backend]!.id);
        break;
      case "advance":
        clock.advance(op.ms);
        break;
    }
  }
  expect(newRecorder.totals("t")).toEqual(oldRecorder.totals("t"));
  expect(newRecorder.spills.size).toBe(0);
}

const weightsArb = fc.array(fc.constantFrom(1, 1, 2, 0.5), { minLength: 4, maxLength: 4 });

describe("the pipeline scheduler against the seed's scheduler", () => {
  it("decides exactly as before at load_factor 0, whatever the loads, states, failures and time", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb(false), { maxLength: 120 }),
        weightsArb,
        fc.constantFrom(0, 30, 1800),
        (ops, w, ttl) => replay(ops, w, 0, ttl),
      ),
      { numRuns: 200 },
    );
  });

  it("decides exactly as before at any load factor while every backend is idle (uniform load)", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(opArb(true), { maxLength: 120 }),
        weightsArb,
        fc.constantFrom(1, 1.25, 2),
        (ops, w, c) => replay(ops, w, c, 1800),
      ),
      { numRuns: 200 },
    );
  });

  it("control: with load and a bound, the decisions do differ (so the two checks above can fail)", async () => {
    await expect(
      replay(
        [
          { kind: "load", backend: 0, inflight: 10, queued: 0 },
          { kind: "load", backend: 1, inflight: 10, queued: 0 },
          { kind: "load", backend: 2, inflight: 10, queued: 0 },
          ...Array.from({ length: 12 }, (_, i): Op => ({ kind: "select", session: i, exclude: 0 })),
        ],
        [1, 1, 1, 1],
        1.25,
        1800,
      ),
    ).rejects.toThrow();
  });
});
