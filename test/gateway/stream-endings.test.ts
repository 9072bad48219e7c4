// Streams the gateway ends itself (deadline, shutdown) end as every broken stream does: an error event, [DONE].
import { connect } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { post, startGatewayFor, startScriptedEngine, type CompletionCall } from "../helpers/faulty-engine.js";

/** An engine whose stream never ends: a token every 10 ms until the connection closes. */
function endlessStream({ res, req }: CompletionCall): void {
  res.writeHead(200, { "content-type": "text/event-stream" });
  const timer = setInterval(
    () => res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "x" } }] })}\n\n`),
    10,
  );
  req.socket.once("close", () => clearInterval(timer));
}

const STREAM = { model: "m", stream: true, messages: [{ role: "user", content: "go" }] };

function lastEvents(text: string): string[] {
  return text.trim().split("\n\n").slice(-2);
}

describe("streams the gateway ends", () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  it("the request deadline ends a stream with an SSE error event and [DONE]", async () => {
    const engine = await startScriptedEngine({ completion: endlessStream });
    closers.push(() => engine.close());
    const gw = await startGatewayFor([{ id: "only", url: engine.url }], {
      upstream: { request_timeout_seconds: 0.3 },
    });
    closers.push(() => gw.close());
    const answer = await post(gw.url, STREAM);
    expect(answer.status).toBe(200);
    const [error, done] = lastEvents(answer.text);
    expect(JSON.parse(error!.slice(6))).toMatchObject({ error: { code: "upstream_timeout" } });
    expect(done).toBe("data: [DONE]");
  });

  it("shutdown: /readyz says not ready at once on open connections; streams end properly when the grace runs out", async () => {
    let engineStreaming: () => void = () => undefined;
    const started = new Promise<void>((resolve) => (engineStreaming = resolve));
    const engine = await startScriptedEngine({
      completion: (call) => {
        endlessStream(call);
        engineStreaming();
      },
    });
    closers.push(() => engine.close());
    const gw = await startGatewayFor([{ id: "only", url: engine.url }]);
    const streaming = post(gw.url, STREAM);
    await started;
    // A connection already open (mid-request) when the shutdown starts.
    const socket = connect(Number(new URL(gw.url).port), "127.0.0.1");
    await new Promise((r) => socket.once("connect", r));
    socket.write("GET /readyz HTTP/1.1\r\nhost: x\r\n");
    const reply = new Promise<string>((resolve) => {
      let text = "";
      socket.on("data", (c: Buffer) => {
        text += c.toString();
        if (text.includes("}")) resolve(text);
      });
    });
    // The gateway holds both connections (the stream's and this one) before the shutdown starts.
    while ((await gw.gateway.openConnections()) < 2) await new Promise((r) => setImmediate(r));
    const closed = gw.gateway.close(300);
    socket.write("\r\n");
    const readyz = await reply;
    socket.destroy();
    expect(readyz).toMatch(/^HTTP\/1.1 503/);
    expect(readyz).toContain('"status":"shutting down"');
    const answer = await streaming;
    await closed;
    const [error, done] = lastEvents(answer.text);
    expect(JSON.parse(error!.slice(6))).toMatchObject({ error: { code: "shutting_down" } });
    expect(done).toBe("data: [DONE]");
  });
});
