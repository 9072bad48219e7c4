// How a response turns engine tokens into socket writes: one write per engine turn, yet one SSE event per token.
import { EventEmitter, once } from "node:events";
import type { ServerResponse } from "node:http";
import { afterEach, describe, expect, it, vi } from "vitest";
import { systemClock, type Clock } from "../../src/core/clock.js";
import { EngineLoop } from "../../src/sim/engine-loop.js";
import type { SimFault } from "../../src/sim/faults.js";
import { GenerationResponse, type ResponseOutcome } from "../../src/sim/generation-response.js";
import type { CostModel } from "../../src/sim/profiles.js";
import { Scheduler } from "../../src/sim/scheduler.js";
import { SimTimeline } from "../../src/sim/sim-timeline.js";
import { FREE, SIMPLE_COST, makeRequest, tokenRange } from "./helpers.js";

/** The part of ServerResponse a GenerationResponse uses, recording each call that reaches the socket. */
class FakeResponse extends EventEmitter {
  readonly writes: { kind: "write" | "end" | "headers"; data: string }[] = [];
  headersSent = false;
  destroyed = false;
  writeHead(): this {
    return this;
  }
  flushHeaders(): void {
    this.headersSent = true;
    this.writes.push({ kind: "headers", data: "" });
  }
  write(data: string, callback?: () => void): boolean {
    this.headersSent = true;
    this.writes.push({ kind: "write", data });
    if (callback) setImmediate(callback);
    return true;
  }
  end(data = ""): this {
    this.headersSent = true;
    this.writes.push({ kind: "end", data });
    return this;
  }
  destroy(): this {
    this.destroyed = true;
    this.emit("destroyed");
    return this;
  }
  get text(): string {
    return this.writes.map((w) => w.data).join("");
  }
}

const loops: EngineLoop[] = [];

afterEach(() => {
  for (const loop of loops.splice(0)) loop.stop();
  vi.useRealTimers();
});

function serve(options: { cost: CostModel; maxTokens: number; fault?: SimFault; n?: number; wall?: Clock }): {
  res: FakeResponse;
  outcomes: ResponseOutcome[];
  /** The first outcome recorded. */
  outcome: Promise<ResponseOutcome>;
} {
  const timeline = new SimTimeline(options.wall ?? systemClock, 1);
  const scheduler = new Scheduler(
    {
      maxNumSeqs: 16,
      maxNumBatchedTokens: 8192,
      kvCapacityBlocks: 1024,
      blockSizeTokens: 16,
      cost: options.cost,
    },
    timeline,
  );
  // No wall-time limit on a turn: on a loaded machine 2 ms can pass mid-burst and split the writes, which is the
  // loop's own business (tested in engine-loop.test.ts), not what these tests look at.
  const loop = new EngineLoop(
    scheduler,
    timeline,
    {},
    { maxWallMs: Number.POSITIVE_INFINITY, maxSteps: 256 },
  );
  loops.push(loop);
  const res = new FakeResponse();
  const outcomes: ResponseOutcome[] = [];
  let recorded!: (outcome: ResponseOutcome) => void;
  const outcome = new Promise<ResponseOutcome>((resolve) => (recorded = resolve));
  const choices = Array.from({ length: options.n ?? 1 }, (_, i) =>
    makeRequest(`r-${i}`, tokenRange(20), options.maxTokens, i),
  );
  const response = new GenerationResponse({
    res: res as unknown as ServerResponse,
    host: {
      currentFault: () => options.fault ?? { kind: "none" },
      abort: (requests) => requests.forEach((request) => loop.abort(request.id)),
      recordOutcome: (o) => {
        outcomes.push(o);
        recorded(o);
      },
    },
    endpoint: "chat",
    identity: { id: "chatcmpl-test", created: 1, model: "m" },
    stream: true,
    includeUsage: true,
    choices,
    promptIndexOfChoice: choices.map(() => 0),
    promptTokens: 20,
  });
  for (const choice of choices) loop.submit(choice, response);
  response.sendHeadersSoon();
  return { res, outcomes, outcome };
}

/** The JSON payloads of the SSE events in `text`, in order. */
function events(text: string): string[] {
  expect(text.endsWith("\n\n")).toBe(true);
  return text
    .slice(0, -2)
    .split("\n\n")
    .map((event) => {
      expect(event.startsWith("data: ")).toBe(true);
      return event.slice("data: ".length);
    });
}

interface Chunk {
  choices: { index: number; delta: { role?: string; content?: string }; finish_reason: string | null }[];
}

describe("streaming on the instant engine", () => {
  it("answers with the headers and every event in one write, one SSE event per token, in order", async () => {
    const { res, outcomes, outcome } = serve({ cost: FREE, maxTokens: 16 });
    await outcome;
    expect(outcomes).toEqual(["served"]);
    expect(res.writes.map((w) => w.kind)).toEqual(["end"]);
    const payloads = events(res.text);
    expect(payloads).toHaveLength(1 + 16 + 2);
    expect(payloads.at(-1)).toBe("[DONE]");
    const chunks = payloads.slice(0, 17).map((p) => JSON.parse(p) as Chunk);
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: "assistant", content: "" });
    const deltas = chunks.slice(1).map((c) => c.choices[0]!);
    expect(deltas.every((d) => d.delta.content!.length === 4)).toBe(true);
    expect(deltas.map((d) => d.finish_reason)).toEqual([...Array<null>(15).fill(null), "length"]);
    // Same seed, same reply: the streamed text is the one the engine generated, token by token.
    const reference = makeRequest("ref", tokenRange(20), 16, 0);
    for (let i = 0; i < 16; i++) reference.appendNextToken();
    expect(deltas.map((d) => d.delta.content).join("")).toBe(reference.outputTexts.join(""));
  });

  it("keeps each choice's events in order when n > 1", async () => {
    const { res, outcomes, outcome } = serve({ cost: FREE, maxTokens: 5, n: 3 });
    await outcome;
    expect(outcomes).toEqual(["served"]);
    const chunks = events(res.text)
      .filter((p) => p !== "[DONE]")
      .map((p) => JSON.parse(p) as Chunk)
      .filter((c) => c.choices.length > 0);
    for (const index of [0, 1, 2]) {
      const mine = chunks.map((c) => c.choices[0]!).filter((c) => c.index === index);
      expect(mine[0]!.delta.role).toBe("assistant");
      expect(mine.slice(1).map((c) => c.finish_reason)).toEqual([null, null, null, null, "length"]);
    }
  });

  it("cuts after exactly the allowed events even when they share one write", async () => {
    for (const afterChunks of [1, 5]) {
      const { res, outcomes } = serve({
        cost: FREE,
        maxTokens: 16,
        fault: { kind: "cut_stream", afterChunks },
      });
      if (!res.destroyed) await once(res, "destroyed");
      expect(outcomes).toEqual(["cut"]);
      expect(events(res.text)).toHaveLength(afterChunks);
      expect(res.text).not.toContain("[DONE]");
    }
  });
});

describe("streaming on a timed engine", () => {
  it("sends the headers at once, then writes each token on its own as its step ends", async () => {
    // Fake timers and a wall clock that follows them: every step ends exactly when the test says so.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setImmediate", "clearImmediate", "Date"] });
    const wall: Clock = { nowMs: () => Date.now() };
    // SIMPLE_COST at time scale 1: the prefill step of 20 tokens takes 12 ms, each decode step 11 ms.
    const { res, outcomes } = serve({ cost: SIMPLE_COST, maxTokens: 4, wall });
    const kinds = (): string[] => res.writes.map((w) => w.kind);
    await vi.advanceTimersByTimeAsync(1);
    expect(kinds()).toEqual(["headers"]);
    await vi.advanceTimersByTimeAsync(10);
    expect(kinds()).toEqual(["headers"]);
    await vi.advanceTimersByTimeAsync(1);
    expect(kinds()).toEqual(["headers", "write"]);
    await vi.advanceTimersByTimeAsync(11);
    expect(kinds()).toEqual(["headers", "write", "write"]);
    await vi.advanceTimersByTimeAsync(22);
    expect(kinds()).toEqual(["headers", "write", "write", "write", "end"]);
    expect(outcomes).toEqual(["served"]);
    // Role and first token together, then one token per write, then the last with usage and [DONE].
    expect(res.writes.slice(1).map((w) => events(w.data).length)).toEqual([2, 1, 1, 3]);
  });
});
