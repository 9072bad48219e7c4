// The dispatcher under random traffic, for every policy: work-conserving, caps held, bands strict, memory bounded.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AttainedService } from "../../../src/admission/flow-queue/attained-service.js";
import {
  FlowDispatcher,
  type FlowRequest,
  type SlotTarget,
} from "../../../src/admission/flow-queue/flow-dispatcher.js";
import { FLOW_POLICY_NAMES } from "../../../src/admission/flow-queue/types.js";
import { ManualClock } from "../../../src/core/clock.js";

type Op =
  | { kind: "arrive"; flow: number; band: number; target: number; capped: boolean }
  | { kind: "finish"; pick: number }
  | { kind: "withdraw"; pick: number }
  | { kind: "tick"; ms: number };

const opArb = (flows: number): fc.Arbitrary<Op> =>
  fc.oneof(
    {
      weight: 5,
      arbitrary: fc.record({
        kind: fc.constant("arrive" as const),
        flow: fc.nat(flows - 1),
        band: fc.integer({ min: -1, max: 3 }),
        target: fc.nat(2),
        capped: fc.boolean(),
      }),
    },
    { weight: 3, arbitrary: fc.record({ kind: fc.constant("finish" as const), pick: fc.nat() }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("withdraw" as const), pick: fc.nat() }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("tick" as const), ms: fc.nat(120_000) }) },
  );

interface Run {
  dispatcher: FlowDispatcher<FlowRequest>;
  targets: SlotTarget[];
  service: AttainedService;
  running: FlowRequest[];
  waiting: Set<FlowRequest>;
  shed: FlowRequest[];
}

function run(
  policy: (typeof FLOW_POLICY_NAMES)[number],
  ops: Op[],
  cap: number,
  maxWaiting: number,
  maxFlows = 1000,
  checkEvery = 1,
): Run {
  const clock = new ManualClock();
  const service = new AttainedService({ halfLifeMs: 30_000, maxFlows }, clock);
  const dispatcher = new FlowDispatcher<FlowRequest>(
    { policy, bands: 3, maxWaiting, maxInflightPerFlow: cap },
    service,
  );
  const targets: SlotTarget[] = [0, 1, 2].map((i) => ({
    id: `e${i}`,
    maxInflight: i + 1,
    inflight: 0,
    queued: 0,
  }));
  const running: FlowRequest[] = [];
  const waiting = new Set<FlowRequest>();
  const shed: FlowRequest[] = [];
  const started = (list: FlowRequest[]): void => {
    for (const item of list) {
      expect(waiting.delete(item)).toBe(true);
      running.push(item);
      service.charge(item.flow, 50);
    }
  };
  for (const [index, op] of ops.entries()) {
    if (op.kind === "arrive") {
      const item: FlowRequest = {
        flow: `f${op.flow}`,
        band: dispatcher.band(op.band),
        seq: dispatcher.nextSeq(),
        target: targets[op.target]!,
        capped: op.capped,
      };
      const arrival = dispatcher.arrive(item);
      if (arrival.granted) {
        running.push(item);
        service.charge(item.flow, 50);
      } else waiting.add(item);
      if (arrival.shed !== undefined) {
        // Shedding is by band: the victim is of the lowest band waiting, never above the newcomer's.
        expect(arrival.shed.band).toBeLessThanOrEqual(item.band);
        for (const w of waiting) expect(w.band).toBeGreaterThanOrEqual(arrival.shed.band);
        expect(waiting.delete(arrival.shed)).toBe(true);
        shed.push(arrival.shed);
      }
    } else if (op.kind === "finish" && running.length > 0) {
      const [item] = running.splice(op.pick % running.length, 1);
      started(dispatcher.finish(item!));
    } else if (op.kind === "withdraw" && waiting.size > 0) {
      const item = [...waiting][op.pick % waiting.size]!;
      expect(dispatcher.withdraw(item)).toBe(true);
      waiting.delete(item);
    } else if (op.kind === "tick") {
      clock.advance(op.ms);
    }
    if (index % checkEvery === 0)
      check({ dispatcher, targets, service, running, waiting, shed }, cap, maxWaiting);
  }
  return { dispatcher, targets, service, running, waiting, shed };
}

function check(r: Run, cap: number, maxWaiting: number): void {
  const runnable = (item: FlowRequest): boolean =>
    item.target.inflight < item.target.maxInflight &&
    (!item.capped || cap === 0 || r.dispatcher.heldBy(item.flow) < cap);
  // Work-conserving: no slot stays idle while a request that could take it waits.
  for (const item of r.waiting) expect(runnable(item)).toBe(false);
  for (const target of r.targets) {
    expect(target.inflight).toBeLessThanOrEqual(target.maxInflight);
    expect(target.inflight).toBe(r.running.filter((i) => i.target === target).length);
    expect(target.queued).toBe([...r.waiting].filter((i) => i.target === target).length);
  }
  // Caps held: a capped flow never holds more than max_inflight_per_agent slots.
  if (cap > 0) {
    const held = new Map<string, number>();
    for (const item of r.running) if (item.capped) held.set(item.flow, (held.get(item.flow) ?? 0) + 1);
    for (const [flow, n] of held) {
      expect(n).toBeLessThanOrEqual(cap);
      expect(r.dispatcher.heldBy(flow)).toBe(n);
    }
  }
  expect(r.dispatcher.size).toBe(r.waiting.size);
  expect(r.dispatcher.size).toBeLessThanOrEqual(maxWaiting);
  expect(r.dispatcher.holdingFlows).toBeLessThanOrEqual(r.running.length);
}

describe.each(FLOW_POLICY_NAMES)("FlowDispatcher (%s)", (policy) => {
  it("is work-conserving, holds caps and the queue bound, sheds by band", () => {
    fc.assert(
      fc.property(
        fc.array(opArb(6), { maxLength: 150 }),
        fc.integer({ min: 0, max: 3 }),
        fc.integer({ min: 0, max: 12 }),
        (ops, cap, maxWaiting) => {
          run(policy, ops, cap, maxWaiting);
        },
      ),
    );
  });

  it("serves a higher band first whenever both could start", () => {
    fc.assert(
      fc.property(fc.array(opArb(4), { maxLength: 80 }), (ops) => {
        const r = run(policy, ops, 0, 50);
        // Drain: each freed slot goes to the highest band waiting for that engine.
        while (r.running.length > 0) {
          const item = r.running.shift()!;
          const before = [...r.waiting].filter((w) => w.target === item.target);
          const top = Math.max(-1, ...before.map((w) => w.band));
          const started = r.dispatcher.finish(item);
          for (const s of started) {
            r.waiting.delete(s);
            r.running.push(s);
            if (s.target === item.target) expect(s.band).toBe(top);
          }
        }
      }),
    );
  });

  it("keeps memory bounded under a flood of new flow ids", () => {
    const ops: Op[] = [];
    for (let i = 0; i < 3000; i++) {
      ops.push({ kind: "arrive", flow: i, band: 1, target: i % 3, capped: true });
      if (i % 2 === 0) ops.push({ kind: "finish", pick: i });
    }
    // flow ids are f0..f2999: opArb's range is only for the random runs
    const r = run(policy, ops, 1, 40, 100, 250);
    expect(r.service.size).toBeLessThanOrEqual(100);
    expect(r.dispatcher.size).toBeLessThanOrEqual(40);
    expect(r.dispatcher.holdingFlows).toBeLessThanOrEqual(6);
  });
});

describe("FlowDispatcher", () => {
  it("holds a flow at its cap while others use the free slots, and starts it when its own request ends", () => {
    const service = new AttainedService({ halfLifeMs: 1000, maxFlows: 10 }, new ManualClock());
    const d = new FlowDispatcher<FlowRequest>(
      { policy: "least-attained", bands: 1, maxWaiting: 10, maxInflightPerFlow: 1 },
      service,
    );
    const engine: SlotTarget = { id: "e", maxInflight: 4, inflight: 0, queued: 0 };
    const req = (flow: string): FlowRequest => ({
      flow,
      band: 0,
      seq: d.nextSeq(),
      target: engine,
      capped: true,
    });
    const a1 = req("a");
    const a2 = req("a");
    const b1 = req("b");
    expect(d.arrive(a1).granted).toBe(true);
    expect(d.arrive(a2).granted).toBe(false);
    expect(d.arrive(b1).granted).toBe(true);
    expect(engine).toMatchObject({ inflight: 2, queued: 1 });
    expect(d.finish(a1)).toEqual([a2]);
  });

  it("sheds the lowest band's request for a higher newcomer, and the newcomer when it is lowest", () => {
    const service = new AttainedService({ halfLifeMs: 1000, maxFlows: 10 }, new ManualClock());
    const d = new FlowDispatcher<FlowRequest>(
      { policy: "fifo", bands: 3, maxWaiting: 2, maxInflightPerFlow: 0 },
      service,
    );
    const engine: SlotTarget = { id: "e", maxInflight: 1, inflight: 1, queued: 0 };
    const req = (band: number): FlowRequest => ({
      flow: "x",
      band,
      seq: d.nextSeq(),
      target: engine,
      capped: false,
    });
    const low = req(0);
    const mid = req(1);
    const high = req(2);
    expect(d.arrive(low).shed).toBeUndefined();
    expect(d.arrive(mid).shed).toBeUndefined();
    expect(d.arrive(high).shed).toBe(low);
    const another = req(0);
    expect(d.arrive(another).shed).toBe(another);
    expect(d.dropTarget("e")).toEqual([mid, high]);
    expect(engine.queued).toBe(0);
  });
});

describe("FlowDispatcher.configure", () => {
  it("re-orders the waiting requests under a new policy and clamps them into fewer bands", () => {
    const service = new AttainedService({ halfLifeMs: 1000, maxFlows: 10 }, new ManualClock());
    const d = new FlowDispatcher<FlowRequest>(
      { policy: "fifo", bands: 3, maxWaiting: 10, maxInflightPerFlow: 0 },
      service,
    );
    const engine: SlotTarget = { id: "e", maxInflight: 1, inflight: 1, queued: 0 };
    const req = (flow: string, band: number): FlowRequest => ({
      flow,
      band,
      seq: d.nextSeq(),
      target: engine,
      capped: false,
    });
    service.charge("heavy", 1000);
    const heavy = req("heavy", 2);
    const light = req("light", 1);
    d.arrive(heavy);
    d.arrive(light);
    expect(
      d.configure({ policy: "least-attained", bands: 1, maxWaiting: 10, maxInflightPerFlow: 0 }),
    ).toEqual([]);
    expect(d.waitingIn(0)).toBe(2);
    expect(d.finish({ flow: "x", capped: false, target: engine })).toEqual([light]);
  });
});
