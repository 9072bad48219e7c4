// A stream's headers leave the engine when the request is taken, before prefill, as vLLM's server sends them: a
// gateway's stream headers timeout (upstream.stream_headers_timeout_seconds) must not take an engine queued behind
// a long prefill for a hung one.
import { afterEach, describe, expect, it } from "vitest";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";

const engines: SimEngineHandle[] = [];

afterEach(async () => {
  await Promise.all(engines.splice(0).map((engine) => engine.close()));
});

/**
 * A timed engine a thousand times slower than its GPU model: its first step (over 11 ms simulated) ends more than
 * 11 s of wall time after the request, so no token can have been made while the test runs.
 */
async function slowEngine(): Promise<SimEngineHandle> {
  const engine = await startSimEngine({ profile: "qwen2.5-7b", timeScale: 0.001 });
  engines.push(engine);
  return engine;
}

const ROUTES = [
  {
    path: "/v1/chat/completions",
    body: { messages: [{ role: "user", content: "Summarise the repository." }], max_tokens: 8 },
  },
  { path: "/v1/completions", body: { prompt: "Summarise the repository.", max_tokens: 8 } },
  {
    path: "/v1/messages",
    body: { messages: [{ role: "user", content: "Summarise the repository." }], max_tokens: 8 },
  },
] as const;

describe("stream headers", () => {
  for (const { path, body } of ROUTES) {
    it(`${path}: sends a stream's headers before its first token`, async () => {
      const engine = await slowEngine();
      const res = await fetch(`${engine.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ ...body, model: engine.model, stream: true }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toContain("text/event-stream");
      const stats = engine.stats();
      expect(stats.running + stats.waiting).toBe(1);
      expect(stats.steps).toBeLessThanOrEqual(1);
      expect(stats.completionTokens).toBe(0);
      await res.body?.cancel();
    });
  }
});
