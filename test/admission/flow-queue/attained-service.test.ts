// Attained service: decay by half-life, corrections, LRU bound, and what a shared store is told.
import { describe, expect, it } from "vitest";
import { AttainedService } from "../../../src/admission/flow-queue/attained-service.js";
import { ManualClock } from "../../../src/core/clock.js";

describe("AttainedService", () => {
  it("halves with each half-life and forgets a flow that decayed to nothing", () => {
    const clock = new ManualClock();
    const s = new AttainedService({ halfLifeMs: 1000, maxFlows: 10 }, clock);
    s.charge("a", 800);
    clock.advance(1000);
    expect(s.value("a")).toBeCloseTo(400, 9);
    s.charge("a", -100); // an estimate corrected downwards
    expect(s.value("a")).toBeCloseTo(300, 9);
    s.takeUnsynced();
    clock.advance(20_000);
    expect(s.value("a")).toBeLessThan(0.5);
    expect(s.size).toBe(0);
  });

  it("remembers at most max_flows, the least recently charged forgotten first", () => {
    const s = new AttainedService({ halfLifeMs: 1000, maxFlows: 2 }, new ManualClock());
    s.charge("a", 1);
    s.charge("b", 1);
    s.charge("a", 1);
    s.charge("c", 1);
    expect(s.size).toBe(2);
    expect(s.value("b")).toBe(0);
    expect(s.value("a")).toBe(2);
  });

  it("hands the unsynced deltas to a shared store once, and adopts the store's totals", () => {
    const s = new AttainedService({ halfLifeMs: 1000, maxFlows: 10 }, new ManualClock());
    s.charge("a", 5);
    s.charge("a", 7);
    expect([...s.takeUnsynced()]).toEqual([["a", 12]]);
    expect(s.takeUnsynced().size).toBe(0);
    s.adopt("a", 100);
    expect(s.value("a")).toBe(100);
  });
});
