// A streaming attempt whose engine hangs before its response headers fails over to the next engine at once.
import { afterEach, describe, expect, it } from "vitest";
import type { HealthTransition } from "../../src/backends/registry.js";
import {
  post,
  startGatewayFor,
  startScriptedEngine,
  type CompletionCall,
  type ScriptedEngine,
} from "../helpers/faulty-engine.js";

const STREAM = { model: "m", stream: true, messages: [{ role: "user", content: "go" }] };

/** A short stream as vLLM sends it: headers, one token, the usage chunk, [DONE]. */
function streamOk({ res }: CompletionCall): void {
  res.writeHead(200, { "content-type": "text/event-stream" });
  const chunk = {
    id: "c",
    object: "chat.completion.chunk",
    choices: [{ index: 0, delta: { content: "hello" } }],
  };
  const usage = {
    id: "c",
    object: "chat.completion.chunk",
    choices: [],
    usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
  };
  res.end(`data: ${JSON.stringify(chunk)}\n\ndata: ${JSON.stringify(usage)}\n\ndata: [DONE]\n\n`);
}

describe("stream headers timeout", () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  it("fails a stream over to a free engine when the first one sends no headers, and counts it against that engine", async () => {
    // Whichever engine the gateway tries first hangs before its headers; the other streams at once.
    let hungId: string | undefined;
    const engines: { id: string; engine: ScriptedEngine }[] = [];
    for (const id of ["a", "b"]) {
      const engine = await startScriptedEngine({
        completion: (call) => {
          if (hungId === undefined || hungId === id) hungId = id;
          else streamOk(call);
        },
      });
      closers.push(() => engine.close());
      engines.push({ id, engine });
    }
    const gw = await startGatewayFor(
      engines.map(({ id, engine }) => ({ id, url: engine.url })),
      {
        // The first-byte timeouts and the deadline stay far off: only the headers timeout can fire.
        upstream: { stream_headers_timeout_seconds: 0.1, max_attempts: 2 },
        health: { ejection_consecutive_failures: 1, probe_interval_seconds: 3600 },
      },
    );
    closers.push(() => gw.close());
    expect(gw.config.upstream.stream_first_byte_timeout_seconds).toBe(60);
    const ejected = new Promise<HealthTransition>((resolve) => {
      const off = gw.gateway.runtime.registry.onHealthChange((t) => {
        if (t.to !== "down") return;
        off();
        resolve(t);
      });
    });
    const answer = await post(gw.url, STREAM, { "x-session-id": "s-headers" });
    expect(answer.status).toBe(200);
    expect(answer.text).toContain('"content":"hello"');
    expect(answer.text.trim().endsWith("data: [DONE]")).toBe(true);
    expect(hungId).toBeDefined();
    const served = engines.find(({ id }) => id !== hungId)!.id;
    expect(answer.headers.get("x-agent-serve-backend")).toBe(served);
    expect(answer.headers.get("x-agent-serve-attempts")).toBe("2");
    // The hung engine's failure fed its health: with one failure to eject, it is out.
    expect((await ejected).backend.id).toBe(hungId);
  });

  it("does not apply to non-streaming requests, and defaults to 5 s", async () => {
    // The engine holds a whole answer and never answers a stream: the stream's 504 proves that the headers
    // timeout has passed for the answer that arrived before it, which must still be served.
    let release: () => void = () => undefined;
    const engine = await startScriptedEngine({
      completion: ({ res, body }) => {
        if ((JSON.parse(body.toString()) as { stream?: boolean }).stream === true) return;
        release = () =>
          res
            .writeHead(200, { "content-type": "application/json" })
            .end(
              JSON.stringify({ choices: [{ index: 0, message: { role: "assistant", content: "late" } }] }),
            );
      },
    });
    closers.push(() => engine.close());
    const gw = await startGatewayFor([{ id: "only", url: engine.url }], {
      upstream: { stream_headers_timeout_seconds: 0.05, max_attempts: 1 },
      health: { ejection_consecutive_failures: 100 },
    });
    closers.push(() => gw.close());
    const arrived = engine.after("completion");
    const whole = post(gw.url, { model: "m", messages: [{ role: "user", content: "x" }] });
    await arrived;
    const streamed = await post(gw.url, STREAM);
    expect(streamed.status).toBe(504);
    expect(JSON.parse(streamed.text)).toMatchObject({ error: { code: "upstream_timeout" } });
    expect(streamed.text).toContain("no response headers");
    release();
    const answer = await whole;
    expect(answer.status).toBe(200);
    expect(answer.text).toContain("late");
    const defaults = await startGatewayFor([{ id: "only", url: engine.url }]);
    closers.push(() => defaults.close());
    expect(defaults.config.upstream.stream_headers_timeout_seconds).toBe(5);
  });
});
