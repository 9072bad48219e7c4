// The tier classifier's core: verdicts, cache, shared calls and every fallback, on a fake clock and timers.
import { describe, expect, it, vi } from "vitest";
import { ManualClock, ManualTimers } from "../../src/core/clock.js";
import {
  parseVerdict,
  TierClassifier,
  type ClassifierAsk,
  type ClassifierOutcome,
} from "../../src/routing/tier-classifier.js";

const TIERS = ["small", "big"];

// The clock starts past 0: lru-cache reads a start time of 0 as "no TTL".
function classifier(ask: ClassifierAsk, clock = new ManualClock(1_000), cacheTtlMs = 60_000) {
  const outcomes: ClassifierOutcome[] = [];
  const timers = new ManualTimers(clock);
  const instance = new TierClassifier({
    ask,
    clock,
    timers,
    tiers: TIERS,
    timeoutMs: 500,
    cacheTtlMs,
    maxEntries: 100,
    record: (outcome) => outcomes.push(outcome),
  });
  return { instance, outcomes, timers };
}

describe("parseVerdict", () => {
  it("reads {tier} naming a known tier, and nothing else", () => {
    expect(parseVerdict('{"tier":"big"}', TIERS)).toBe("big");
    expect(parseVerdict(' {"tier": "small"}\n', TIERS)).toBe("small");
    expect(parseVerdict('{"tier":"huge"}', TIERS)).toBeUndefined();
    expect(parseVerdict("big", TIERS)).toBeUndefined();
    expect(parseVerdict('{"choice":"big"}', TIERS)).toBeUndefined();
    expect(parseVerdict("[]", TIERS)).toBeUndefined();
  });
});

describe("TierClassifier", () => {
  it("takes the engine's verdict, then answers the same question from its cache until the TTL passes", async () => {
    const clock = new ManualClock(1_000);
    const ask = vi.fn<ClassifierAsk>(async () => '{"tier":"big"}');
    const { instance, outcomes } = classifier(ask, clock);
    expect(await instance.classify("prove it", "small")).toEqual({ tier: "big", outcome: "answered" });
    expect(await instance.classify("prove it", "small")).toEqual({ tier: "big", outcome: "cached" });
    expect(ask).toHaveBeenCalledTimes(1);
    clock.advance(60_001);
    await instance.classify("prove it", "small");
    expect(ask).toHaveBeenCalledTimes(2);
    expect(outcomes).toEqual(["answered", "cached", "answered"]);
  });

  it("shares one call among concurrent identical questions", async () => {
    let answer: (text: string) => void = () => undefined;
    const ask = vi.fn<ClassifierAsk>(() => new Promise((resolve) => (answer = resolve)));
    const { instance, outcomes } = classifier(ask);
    const verdicts = Promise.all([1, 2, 3].map(() => instance.classify("same", "small")));
    await Promise.resolve();
    answer('{"tier":"big"}');
    expect((await verdicts).map((v) => v.tier)).toEqual(["big", "big", "big"]);
    expect(ask).toHaveBeenCalledTimes(1);
    expect(outcomes.sort()).toEqual(["answered", "cached", "cached"]);
  });

  it("falls back to the rules' tier on a hung engine at its timeout, and aborts the call", async () => {
    let aborted = false;
    const ask: ClassifierAsk = (_q, _t, signal) =>
      new Promise(() => signal.addEventListener("abort", () => (aborted = true)));
    const { instance, outcomes, timers } = classifier(ask);
    const verdict = instance.classify("slow", "small");
    timers.advance(499);
    expect(aborted).toBe(false);
    timers.advance(1);
    expect(await verdict).toEqual({ tier: "small", outcome: "timeout" });
    expect(aborted).toBe(true);
    expect(outcomes).toEqual(["timeout"]);
  });

  it("falls back on an engine error and on an answer it cannot read, caching neither", async () => {
    const failing = classifier(async () => {
      throw new Error("503");
    });
    expect(await failing.instance.classify("q", "small")).toEqual({ tier: "small", outcome: "error" });
    const nonsense = vi.fn<ClassifierAsk>(async () => "I think big");
    const confused = classifier(nonsense);
    expect(await confused.instance.classify("q", "small")).toEqual({
      tier: "small",
      outcome: "unparseable",
    });
    await confused.instance.classify("q", "small");
    expect(nonsense).toHaveBeenCalledTimes(2);
  });

  it("never caches with a TTL of 0", async () => {
    const ask = vi.fn<ClassifierAsk>(async () => '{"tier":"big"}');
    const { instance } = classifier(ask, new ManualClock(), 0);
    await instance.classify("q", "small");
    await instance.classify("q", "small");
    expect(ask).toHaveBeenCalledTimes(2);
  });
});
