// Continuous batching on a manual clock: admission limits, FCFS, chunked prefill, step pricing, preemption, abort.
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/core/clock.js";
import { SimTimeline } from "../../src/sim/sim-timeline.js";
import { runStep, runUntilIdle } from "../../src/sim/simulate.js";
import { makeRequest, makeScheduler, SIMPLE_COST, tokenRange } from "./helpers.js";

describe("scheduler", () => {
  it("runs at most max_num_seqs sequences and queues the rest first come, first served", () => {
    const { scheduler, clock } = makeScheduler({ maxNumSeqs: 2 });
    const a = makeRequest("a", tokenRange(20, 1), 3);
    const b = makeRequest("b", tokenRange(20, 100), 5);
    const c = makeRequest("c", tokenRange(20, 200), 2);
    for (const request of [a, b, c]) scheduler.add(request);

    const first = runStep(scheduler, clock)!;
    expect(first.plan.sequences.map((s) => s.request.id)).toEqual(["a", "b"]);
    expect(scheduler.numRunning).toBe(2);
    expect(scheduler.numWaiting).toBe(1);

    // a finishes after its third token; c is admitted in the very next step, batched with b's decode.
    runStep(scheduler, clock);
    runStep(scheduler, clock);
    expect(a.status).toBe("finished");
    const next = runStep(scheduler, clock)!;
    expect(next.plan.sequences.map((s) => s.request.id)).toEqual(["b", "c"]);
    runUntilIdle(scheduler, clock);
    expect([a, b, c].map((r) => r.numOutputTokens)).toEqual([3, 5, 2]);
  });

  it("splits a long prompt into chunks of the step token budget (chunked prefill)", () => {
    const { scheduler, clock } = makeScheduler({ maxNumBatchedTokens: 64, cost: SIMPLE_COST });
    const request = makeRequest("long", tokenRange(200), 2);
    scheduler.add(request);
    const chunks: number[] = [];
    while (request.firstTokenMs === undefined)
      chunks.push(runStep(scheduler, clock)!.plan.sequences[0]!.numNewTokens);
    expect(chunks).toEqual([64, 64, 64, 8]);
    // Each chunk costs the 10 ms overhead plus 0.1 ms per token.
    expect(request.firstTokenMs).toBeCloseTo(4 * 10 + 200 * 0.1);
  });

  it("lets a request admitted in the step of another's last prefill chunk reuse that chunk, as vLLM caches at allocation", () => {
    // Block size 16, 64 tokens per step: a's 208-token prompt takes chunks of 64, 64, 64 and 16, the last one
    // filling block 12. b shares all 208 tokens, arrives while a computes, and is admitted in a's last step.
    const { scheduler, clock } = makeScheduler({ maxNumBatchedTokens: 64, cost: SIMPLE_COST });
    const a = makeRequest("a", tokenRange(208), 2);
    scheduler.add(a);
    runStep(scheduler, clock);
    const b = makeRequest("b", [...tokenRange(208), ...tokenRange(40, 9_000)], 2);
    scheduler.add(b);
    runStep(scheduler, clock);
    runStep(scheduler, clock);
    const last = runStep(scheduler, clock)!;
    expect(last.plan.sequences.map((s) => [s.request.id, s.numNewTokens])).toEqual([
      ["a", 16],
      ["b", 40],
    ]);
    // a's 13 blocks were cached when their steps were scheduled, its last one just before b's admission: b
    // reuses all of them (cached when a step ended, it found 12 and computed block 12 again).
    expect(b.numCachedTokens).toBe(208);
  });

  it("prices a step from the cost model: overhead + prefill tokens + decoding sequences", () => {
    const { scheduler, clock } = makeScheduler({ cost: SIMPLE_COST });
    scheduler.add(makeRequest("a", tokenRange(30, 1), 4));
    runStep(scheduler, clock);
    scheduler.add(makeRequest("b", tokenRange(50, 500), 4));
    const mixed = scheduler.schedule()!;
    // a decodes one token, b prefills 50: 10 + 50 * 0.1 + 1 * 1.
    expect(mixed.durationMs).toBeCloseTo(16);
    expect(mixed.work.decodeSeqs).toBe(1);
    expect(mixed.work.prefillTokens).toBe(50);
    clock.advance(mixed.durationMs);
    scheduler.commit(mixed);
    expect(scheduler.schedule()!.durationMs).toBeCloseTo(12);
  });

  it("measures time to first token and end-to-end latency on the injected clock", () => {
    const { scheduler, clock } = makeScheduler({ cost: SIMPLE_COST });
    clock.set(1000);
    const request = makeRequest("r", tokenRange(100), 5);
    scheduler.add(request);
    runUntilIdle(scheduler, clock);
    expect(request.arrivalMs).toBe(1000);
    expect(request.firstTokenMs! - request.arrivalMs).toBeCloseTo(10 + 100 * 0.1);
    // four more decode steps of 10 + 1 ms each.
    expect(request.finishedMs! - request.arrivalMs).toBeCloseTo(20 + 4 * 11);
  });

  it("makes a queued request wait for a running one's step, so its queue time shows in its latency", () => {
    const { scheduler, clock } = makeScheduler({ maxNumSeqs: 1, cost: SIMPLE_COST });
    const first = makeRequest("first", tokenRange(100, 1), 3);
    const second = makeRequest("second", tokenRange(100, 500), 3);
    scheduler.add(first);
    scheduler.add(second);
    runUntilIdle(scheduler, clock);
    expect(second.firstScheduledMs).toBeCloseTo(first.finishedMs!);
    expect(second.firstTokenMs! - second.arrivalMs).toBeGreaterThan(first.finishedMs! - first.arrivalMs);
  });

  it("preempts the newest running sequence when the cache is full, then recomputes it to the same reply", () => {
    const pressured = makeScheduler({ kvCapacityBlocks: 8 });
    const relaxed = makeScheduler({ kvCapacityBlocks: 1000 });
    const replies: string[][] = [];
    for (const { scheduler, clock } of [pressured, relaxed]) {
      const a = makeRequest("a", tokenRange(40, 1), 40);
      const b = makeRequest("b", tokenRange(40, 500), 40);
      scheduler.add(a);
      scheduler.add(b);
      runUntilIdle(scheduler, clock);
      replies.push(...[a, b].map((r) => r.outputTexts));
      expect(a.numOutputTokens).toBe(40);
      expect(b.numOutputTokens).toBe(40);
    }
    expect(pressured.scheduler.totals.preemptions).toBeGreaterThan(0);
    expect(relaxed.scheduler.totals.preemptions).toBe(0);
    expect(replies[0]).toEqual(replies[2]);
    expect(replies[1]).toEqual(replies[3]);
  });

  it("frees an aborted request's blocks at once, even mid-step", () => {
    const { scheduler, clock } = makeScheduler({ kvCapacityBlocks: 10 });
    scheduler.add(makeRequest("gone", tokenRange(60), 50));
    const step = scheduler.schedule()!;
    expect(scheduler.kvCacheUsage).toBeGreaterThan(0);
    expect(scheduler.abort("gone")).toBe(true);
    expect(scheduler.kvCacheUsage).toBe(0);
    clock.advance(step.durationMs);
    expect(scheduler.commit(step)).toEqual([]);
    expect(scheduler.hasWork).toBe(false);
    expect(scheduler.totals.finishedAbort).toBe(1);
  });

  it("counts prefix-cache queries and hits in tokens, once per request", () => {
    const { scheduler, clock } = makeScheduler();
    const prompt = tokenRange(70);
    for (const id of ["x", "y"]) {
      scheduler.add(makeRequest(id, prompt, 2));
      runUntilIdle(scheduler, clock);
    }
    expect(scheduler.totals.prefixCacheQueries).toBe(140);
    expect(scheduler.totals.prefixCacheHits).toBe(64);
    expect(scheduler.totals.promptTokens).toBe(140);
    expect(scheduler.totals.generationTokens).toBe(4);
  });
});

describe("simulated timeline", () => {
  it("runs the wall clock times the scale, never backwards, clamped to a step in flight", () => {
    const wall = new ManualClock(5_000);
    const timeline = new SimTimeline(wall, 10);
    wall.advance(3);
    expect(timeline.nowMs()).toBe(30);
    timeline.pin(30);
    wall.advance(50);
    expect(timeline.nowMs()).toBe(30);
    timeline.spanStep(30, 100);
    expect(timeline.nowMs()).toBe(100);
    expect(timeline.wallDelayUntilMs(100)).toBe(-43);
    timeline.pin(100);
    timeline.release();
    expect(timeline.nowMs()).toBe(530);
    expect(timeline.stepStartMs(true)).toBe(100);
  });
});
