// The contract every flow policy keeps, run by each policy's test (Hono's common.case.test.ts style).
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AttainedService } from "../../../src/admission/flow-queue/attained-service.js";
import type { FlowItem, FlowPolicy } from "../../../src/admission/flow-queue/types.js";
import { ManualClock } from "../../../src/core/clock.js";

export interface Item extends FlowItem {
  readonly id: number;
}

export type MakePolicy = (service: AttainedService) => FlowPolicy<Item>;

export function newService(clock = new ManualClock()): AttainedService {
  return new AttainedService({ halfLifeMs: 60_000, maxFlows: 1000 }, clock);
}

const itemsArb = fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 1, maxLength: 40 });

function fill(policy: FlowPolicy<Item>, flows: number[]): Item[] {
  const items = flows.map((f, i) => ({ flow: `f${f}`, band: 0, seq: i, id: i }));
  for (const item of items) policy.push(item);
  return items;
}

export function policyContract(name: string, make: MakePolicy): void {
  describe(`FlowPolicy contract: ${name}`, () => {
    it("is empty when new: nothing to take, nothing to shed", () => {
      const policy = make(newService());
      expect(policy.size).toBe(0);
      expect(policy.take(() => true)).toBeUndefined();
      expect(policy.last()).toBeUndefined();
    });

    it("gives back every request exactly once, each flow's in arrival order", () => {
      fc.assert(
        fc.property(itemsArb, (flows) => {
          const policy = make(newService());
          const items = fill(policy, flows);
          const taken: Item[] = [];
          for (let item = policy.take(() => true); item !== undefined; item = policy.take(() => true))
            taken.push(item);
          expect(taken.map((i) => i.id).sort((a, b) => a - b)).toEqual(items.map((i) => i.id));
          expect(policy.size).toBe(0);
          for (const flow of new Set(flows)) {
            const seqs = taken.filter((i) => i.flow === `f${flow}`).map((i) => i.seq);
            expect(seqs).toEqual([...seqs].sort((a, b) => a - b));
          }
        }),
      );
    });

    it("takes only what `eligible` accepts, and something whenever it accepts anything", () => {
      fc.assert(
        fc.property(itemsArb, fc.func(fc.boolean()), (flows, accept) => {
          const policy = make(newService());
          const items = fill(policy, flows);
          const eligible = (item: Item): boolean => accept(item.id);
          const taken = policy.take(eligible);
          if (items.some(eligible)) expect(taken !== undefined && eligible(taken)).toBe(true);
          else expect(taken).toBeUndefined();
        }),
      );
    });

    it("a removed request is never taken; removing it twice says so; `last` is always one still waiting", () => {
      fc.assert(
        fc.property(itemsArb, fc.nat(), (flows, pick) => {
          const policy = make(newService());
          const items = fill(policy, flows);
          const gone = items[pick % items.length]!;
          expect(policy.remove(gone)).toBe(true);
          expect(policy.remove(gone)).toBe(false);
          expect(policy.size).toBe(items.length - 1);
          const left = new Set<Item>(items.filter((i) => i !== gone));
          for (let n = policy.size; n > 0; n--) {
            const last = policy.last()!;
            expect(left.has(last)).toBe(true);
            const item = policy.take(() => true)!;
            expect(left.delete(item)).toBe(true);
          }
          expect(policy.last()).toBeUndefined();
        }),
      );
    });

    it("starves no flow: with every flow always waiting, each is served within every window of queue-length takes", () => {
      fc.assert(
        fc.property(
          fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 2, maxLength: 5 }),
          fc.integer({ min: 20, max: 120 }),
          (bursts, steps) => {
            const clock = new ManualClock();
            const service = newService(clock);
            const policy = make(service);
            let seq = 0;
            const waiting = bursts.map(() => 0);
            const refill = (flow: number): void => {
              for (let i = 0; i < bursts[flow]!; i++)
                policy.push({ flow: `f${flow}`, band: 0, seq, id: seq++ });
              waiting[flow] = bursts[flow]!;
            };
            bursts.forEach((_, flow) => refill(flow));
            const queueBound = bursts.reduce((a, b) => a + b, 0);
            const lastServed = bursts.map(() => 0);
            for (let step = 1; step <= steps; step++) {
              clock.advance(10);
              const item = policy.take(() => true)!;
              const flow = Number(item.flow.slice(1));
              service.charge(item.flow, 100);
              lastServed[flow] = step;
              // A flow whose last request was served asks again at once: every flow is always waiting.
              if (--waiting[flow]! === 0) refill(flow);
              for (const served of lastServed) expect(step - served).toBeLessThanOrEqual(queueBound);
            }
          },
        ),
      );
    });
  });
}
