// Streaming over real HTTP: the instant engine coalesces its writes but still sends one SSE event per token, in
// order; a timed engine still streams token by token, as its steps end.
import { afterEach, describe, expect, it } from "vitest";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";

const engines: SimEngineHandle[] = [];

afterEach(async () => {
  await Promise.all(engines.splice(0).map((engine) => engine.close()));
});

async function start(options: Parameters<typeof startSimEngine>[0]): Promise<SimEngineHandle> {
  const engine = await startSimEngine(options);
  engines.push(engine);
  return engine;
}

function chat(engine: SimEngineHandle, body: object): Promise<Response> {
  return fetch(`${engine.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify(body) });
}

interface Delta {
  content?: string;
  role?: string;
}

/** Reads an SSE body, noting the wall time each event arrived at. */
async function readEvents(res: Response): Promise<{ data: string; atMs: number }[]> {
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  const events: { data: string; atMs: number }[] = [];
  let buffered = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    const atMs = performance.now();
    buffered += value;
    let end: number;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      expect(event.startsWith("data: ")).toBe(true);
      events.push({ data: event.slice("data: ".length), atMs });
    }
  }
  expect(buffered).toBe("");
  return events;
}

function deltaOf(data: string): Delta {
  return (JSON.parse(data) as { choices: { delta: Delta }[] }).choices[0]!.delta;
}

describe("instant engine", () => {
  it("streams one event per token, in the order of the non-streamed reply", async () => {
    const engine = await start({ profile: "instant", seed: 5 });
    const request = { messages: [{ role: "user", content: "Count for me." }], max_tokens: 64 };
    const whole = (await (await chat(engine, request)).json()) as {
      choices: { message: { content: string } }[];
    };
    const res = await chat(engine, { ...request, stream: true });
    expect(res.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const events = await readEvents(res);
    expect(events).toHaveLength(1 + 64 + 1);
    expect(events.at(-1)!.data).toBe("[DONE]");
    expect(deltaOf(events[0]!.data)).toEqual({ role: "assistant", content: "" });
    const pieces = events.slice(1, -1).map((event) => deltaOf(event.data).content!);
    expect(pieces.every((piece) => piece.length === 4)).toBe(true);
    expect(pieces.join("")).toBe(whole.choices[0]!.message.content);
  });
});

describe("timed engine", () => {
  it("streams token by token over time, as its steps end", async () => {
    // qwen2.5-7b at time scale 0.1: each decode step takes ~118 ms of wall time, so steps stay apart even when
    // this process (which runs the engine too) stalls for a while on a loaded machine.
    const engine = await start({ profile: "qwen2.5-7b", timeScale: 0.1 });
    const res = await chat(engine, {
      messages: [{ role: "user", content: "Slowly, please." }],
      max_tokens: 5,
      stream: true,
    });
    const events = await readEvents(res);
    const tokens = events.filter((event) => event.data !== "[DONE]" && deltaOf(event.data).content);
    expect(tokens).toHaveLength(5);
    // The tokens arrive as their steps end, not all in one write at the end (a timer that fires very late may
    // let two due steps share a write, so this asks for most of them to be apart, not all). How long the steps
    // take in wall time is bench/sim/wall-time.ts's to measure.
    const arrivals = new Set(tokens.map((token) => token.atMs));
    expect(arrivals.size).toBeGreaterThanOrEqual(3);
  });
});
