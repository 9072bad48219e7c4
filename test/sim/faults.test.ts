// Injected failures: die (and restart on the same port), hang, slow, error_rate, cut_stream, and their spellings.
import { request as undiciRequest } from "undici";
import { afterEach, describe, expect, it } from "vitest";
import { parseFault, parseFaultSpec } from "../../src/sim/faults.js";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";

const engines: SimEngineHandle[] = [];

async function start(options: Parameters<typeof startSimEngine>[0] = {}): Promise<SimEngineHandle> {
  const engine = await startSimEngine({ profile: "instant", ...options });
  engines.push(engine);
  return engine;
}

afterEach(async () => {
  await Promise.all(engines.splice(0).map((engine) => engine.close()));
});

const CHAT = { messages: [{ role: "user", content: "hello" }], max_tokens: 8 };

function chat(engine: SimEngineHandle, body: object = CHAT, signal?: AbortSignal): Promise<Response> {
  return fetch(`${engine.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify(body), signal });
}

/** Resolves to "timeout" if the promise has not settled within `ms`. */
function within<T>(promise: Promise<T>, ms: number): Promise<T | "timeout"> {
  return Promise.race([
    promise,
    new Promise<"timeout">((resolve) => setTimeout(() => resolve("timeout"), ms)),
  ]);
}

describe("die", () => {
  it("drops open streams, stops listening, and frees the port for a restarted engine", async () => {
    const engine = await start({ profile: "qwen2.5-7b" });
    const res = await chat(engine, { ...CHAT, max_tokens: 5000, stream: true });
    const reader = res.body!.getReader();
    await reader.read();
    engine.setFault({ kind: "die" });
    await expect(
      (async () => {
        while (!(await reader.read()).done);
      })(),
    ).rejects.toThrow();
    await expect(fetch(`${engine.url}/health`)).rejects.toThrow();
    await engine.close();

    const restarted = await start({ port: engine.port });
    expect(restarted.port).toBe(engine.port);
    expect((await fetch(`${restarted.url}/health`)).status).toBe(200);
  });

  it("can be set over HTTP, answering before it dies", async () => {
    let died!: () => void;
    const dead = new Promise<void>((resolve) => (died = resolve));
    const engine = await start({ onDie: () => died() });
    const res = await fetch(`${engine.url}/sim/fault`, {
      method: "POST",
      body: JSON.stringify({ kind: "die" }),
    });
    expect(res.status).toBe(200);
    await dead;
    await expect(fetch(`${engine.url}/health`)).rejects.toThrow();
  });
});

describe("hang", () => {
  it("accepts requests and never answers them until the fault is lifted", async () => {
    const engine = await start();
    engine.setFault({ kind: "hang" });
    const controller = new AbortController();
    const pending = chat(engine, CHAT, controller.signal);
    expect(await within(pending, 150)).toBe("timeout");
    expect(await within(fetch(`${engine.url}/health`, { signal: controller.signal }), 50)).toBe("timeout");
    controller.abort();
    await pending.catch(() => undefined);

    const lift = await fetch(`${engine.url}/sim/fault`, {
      method: "POST",
      body: JSON.stringify({ kind: "none" }),
    });
    expect(await lift.json()).toEqual({ kind: "none" });
    expect((await chat(engine)).status).toBe(200);
  });
});

describe("slow", () => {
  // The added latency itself is wall time: bench/sim/wall-time.ts measures it (tests do not time a loaded machine).
  it("still answers every generation request, later", async () => {
    const engine = await start();
    engine.setFault({ kind: "slow", extraLatencyMs: 120 });
    const res = await chat(engine);
    expect(res.status).toBe(200);
    expect(((await res.json()) as { choices: unknown[] }).choices).toHaveLength(1);
  });
});

describe("error_rate", () => {
  it("fails every request at rate 1 with the given status in vLLM's envelope", async () => {
    const engine = await start();
    engine.setFault({ kind: "error_rate", rate: 1, status: 503 });
    const res = await chat(engine);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ object: "error", code: 503, error: { code: 503 } });
    expect(engine.stats().requestsFailed).toBe(1);
  });

  it("fails about the given fraction, reproducibly for a seed", async () => {
    const outcomes = async (): Promise<number[]> => {
      const engine = await start({ seed: 3, fault: { kind: "error_rate", rate: 0.3 } });
      const statuses: number[] = [];
      for (let i = 0; i < 60; i++) {
        const res = await chat(engine);
        await res.arrayBuffer();
        statuses.push(res.status);
      }
      return statuses;
    };
    const first = await outcomes();
    const failures = first.filter((s) => s === 500).length;
    expect(failures).toBeGreaterThan(8);
    expect(failures).toBeLessThan(30);
    expect(await outcomes()).toEqual(first);
  });
});

describe("cut_stream", () => {
  it("drops the connection after the given number of SSE chunks, without [DONE]", async () => {
    const engine = await start();
    engine.setFault({ kind: "cut_stream", afterChunks: 3 });
    const { body } = await undiciRequest(`${engine.url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ ...CHAT, stream: true }),
    });
    let text = "";
    await expect(
      (async () => {
        for await (const chunk of body) text += String(chunk);
      })(),
    ).rejects.toThrow();
    expect(text.split("data: ").length - 1).toBe(3);
    expect(text).not.toContain("[DONE]");
    expect(engine.stats().running).toBe(0);
  });

  it("lets through exactly the allowed events when the cut falls inside one write", async () => {
    // The instant engine writes a whole short answer at once: the cut must still land on the right event.
    for (const afterChunks of [1, 4]) {
      const engine = await start({ fault: { kind: "cut_stream", afterChunks } });
      const { body } = await undiciRequest(`${engine.url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify({ ...CHAT, stream: true }),
      });
      let text = "";
      await expect(
        (async () => {
          for await (const chunk of body) text += String(chunk);
        })(),
      ).rejects.toThrow();
      expect(text.split("data: ").length - 1).toBe(afterChunks);
      expect(text.endsWith("\n\n")).toBe(true);
    }
  });

  it("truncates a non-streaming body mid-way", async () => {
    const engine = await start({ fault: { kind: "cut_stream", afterChunks: 0 } });
    await expect(chat(engine).then((res) => res.json())).rejects.toThrow();
  });
});

describe("fault spellings", () => {
  it("parses CLI specs", () => {
    expect(parseFaultSpec("slow:250")).toEqual({ kind: "slow", extraLatencyMs: 250 });
    expect(parseFaultSpec("error_rate:0.5:502")).toEqual({ kind: "error_rate", rate: 0.5, status: 502 });
    expect(parseFaultSpec("error_rate:0.5")).toEqual({ kind: "error_rate", rate: 0.5 });
    expect(parseFaultSpec("cut_stream:4")).toEqual({ kind: "cut_stream", afterChunks: 4 });
    expect(parseFaultSpec("die")).toEqual({ kind: "die" });
    expect(() => parseFaultSpec("slow")).toThrow(RangeError);
    expect(() => parseFaultSpec("error_rate:2")).toThrow(RangeError);
    expect(() => parseFaultSpec("explode")).toThrow(RangeError);
  });

  it("rejects malformed JSON faults, over HTTP with a 400", async () => {
    expect(() => parseFault({ kind: "slow" })).toThrow(/extraLatencyMs/);
    const engine = await start();
    const res = await fetch(`${engine.url}/sim/fault`, {
      method: "POST",
      body: JSON.stringify({ kind: "melt" }),
    });
    expect(res.status).toBe(400);
    expect(engine.fault()).toEqual({ kind: "none" });
  });
});
