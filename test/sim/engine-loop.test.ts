// The real-time driver: zero-cost steps run back to back within one event-loop turn (bounded by the turn budget),
// timed steps still wait for their simulated duration, one token at a time.
import { afterEach, describe, expect, it, vi } from "vitest";
import { systemClock, type Clock } from "../../src/core/clock.js";
import { EngineLoop, type RequestListener, type TurnBudget } from "../../src/sim/engine-loop.js";
import type { CostModel } from "../../src/sim/profiles.js";
import type { EngineRequest } from "../../src/sim/request.js";
import { Scheduler } from "../../src/sim/scheduler.js";
import { SimTimeline } from "../../src/sim/sim-timeline.js";
import { FREE, SIMPLE_COST, makeRequest, tokenRange } from "./helpers.js";

const loops: EngineLoop[] = [];

afterEach(() => {
  for (const loop of loops.splice(0)) loop.stop();
});

function makeLoop(cost: CostModel, budget?: TurnBudget, wall: Clock = systemClock): EngineLoop {
  const timeline = new SimTimeline(wall, 1);
  const scheduler = new Scheduler(
    { maxNumSeqs: 16, maxNumBatchedTokens: 8192, kvCapacityBlocks: 1024, blockSizeTokens: 16, cost },
    timeline,
  );
  const loop = new EngineLoop(scheduler, timeline, {}, budget);
  loops.push(loop);
  return loop;
}

/** Records every callback. */
class Recorder implements RequestListener {
  readonly tokens: { index: number }[] = [];
  finished = false;
  constructor(private readonly onDone?: () => void) {}
  onToken(_request: EngineRequest, tokenIndex: number): void {
    this.tokens.push({ index: tokenIndex });
  }
  onFinish(): void {
    this.finished = true;
    this.onDone?.();
  }
}

/** Resolves after every immediate queued so far (one engine turn that was already due) has run. */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

const GENEROUS: TurnBudget = { maxWallMs: 10_000, maxSteps: 10_000 };

describe("zero-cost steps", () => {
  it("never calls a listener back from inside submit()", () => {
    const loop = makeLoop(FREE, GENEROUS);
    const recorder = new Recorder();
    loop.submit(makeRequest("a", tokenRange(20), 16), recorder);
    expect(recorder.tokens).toEqual([]);
  });

  it("run back to back: a whole reply arrives in the engine's next turn, in order", async () => {
    const loop = makeLoop(FREE, GENEROUS);
    const first = new Recorder();
    const second = new Recorder();
    loop.submit(makeRequest("a", tokenRange(20), 16), first);
    loop.submit(makeRequest("b", tokenRange(40, 100), 9), second);
    await nextTurn();
    expect(first.tokens.map((t) => t.index)).toEqual(tokenRange(16, 0));
    expect(second.tokens.map((t) => t.index)).toEqual(tokenRange(9, 0));
    expect(first.finished && second.finished).toBe(true);
    expect(loop.scheduler.totals.steps).toBe(16);
  });

  it("end the turn when its step budget is spent, and carry on in the next one", async () => {
    const loop = makeLoop(FREE, { maxWallMs: 10_000, maxSteps: 4 });
    const recorder = new Recorder();
    loop.submit(makeRequest("a", tokenRange(20), 10), recorder);
    await nextTurn();
    expect(recorder.tokens.map((t) => t.index)).toEqual([0, 1, 2, 3]);
    await nextTurn();
    expect(recorder.tokens.map((t) => t.index)).toEqual(tokenRange(8, 0));
    await nextTurn();
    expect(recorder.tokens).toHaveLength(10);
    expect(recorder.finished).toBe(true);
  });

  it("end the turn when its wall-time budget is spent", async () => {
    const loop = makeLoop(FREE, { maxWallMs: 0, maxSteps: 10_000 });
    let finished!: () => void;
    const done = new Promise<void>((resolve) => (finished = resolve));
    const recorder = new Recorder(() => finished());
    loop.submit(makeRequest("a", tokenRange(20), 5), recorder);
    await nextTurn();
    expect(recorder.tokens).toHaveLength(1);
    await done;
    expect(recorder.tokens.map((t) => t.index)).toEqual(tokenRange(5, 0));
  });

  it("admit a request submitted from a listener callback in the same turn", async () => {
    const loop = makeLoop(FREE, GENEROUS);
    const second = new Recorder();
    const first = new Recorder(() => loop.submit(makeRequest("b", tokenRange(20, 50), 3), second));
    loop.submit(makeRequest("a", tokenRange(20), 3), first);
    await nextTurn();
    expect(first.finished).toBe(true);
    expect(second.tokens.map((t) => t.index)).toEqual([0, 1, 2]);
    expect(second.finished).toBe(true);
  });
});

describe("timed steps", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("still produce one token per step, none before its step has ended", () => {
    // The loop's timers and its wall clock on fake time: each step's end is checked to the millisecond.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setImmediate", "clearImmediate", "Date"] });
    const wall: Clock = { nowMs: () => Date.now() };
    // SIMPLE_COST at time scale 1: the prefill step of 20 tokens takes 12 ms, each decode step 11 ms.
    const loop = makeLoop(SIMPLE_COST, GENEROUS, wall);
    const recorder = new Recorder();
    const submittedAt = Date.now();
    loop.submit(makeRequest("a", tokenRange(20), 4), recorder);
    const endsMs = [12, 23, 34, 45];
    endsMs.forEach((endMs, i) => {
      vi.advanceTimersByTime(submittedAt + endMs - 1 - Date.now());
      expect(recorder.tokens.map((t) => t.index)).toEqual(tokenRange(i, 0)); // not before its step ended
      vi.advanceTimersByTime(2);
      expect(recorder.tokens.map((t) => t.index)).toEqual(tokenRange(i + 1, 0)); // as soon as it ended
    });
    expect(recorder.finished).toBe(true);
    expect(loop.scheduler.totals.steps).toBe(4);
  });
});
