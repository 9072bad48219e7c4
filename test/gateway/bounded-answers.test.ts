// Answers the gateway cannot relay as they are: too large, or a 200 that is not JSON; engines' Retry-After.
import { afterEach, describe, expect, it } from "vitest";
import { answerOk, post, startGatewayFor, startScriptedEngine } from "../helpers/faulty-engine.js";

describe("bounded and checked answers", () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  it("a non-streaming answer past upstream.max_response_bytes is a clear 502, and its slot is released", async () => {
    let aborted = 0;
    let bothDropped: () => void = () => undefined;
    const dropped = new Promise<void>((resolve) => (bothDropped = resolve));
    const engine = await startScriptedEngine({
      completion: ({ res, req }) => {
        // Chunked and endless: the engine does not say how long its answer is.
        res.writeHead(200, { "content-type": "application/json" });
        res.write('{"choices":[{"message":{"content":"');
        const chunk = "x".repeat(16 * 1024);
        const timer = setInterval(() => res.write(chunk), 1);
        req.socket.once("close", () => {
          if (++aborted === 2) bothDropped();
          clearInterval(timer);
        });
      },
    });
    closers.push(() => engine.close());
    const gw = await startGatewayFor([{ id: "only", url: engine.url, maxInflight: 1 }], {
      upstream: { max_response_bytes: 256 * 1024 },
    });
    closers.push(() => gw.close());
    for (let i = 0; i < 2; i++) {
      const answer = await post(gw.url);
      expect(answer.status).toBe(502);
      expect(JSON.parse(answer.text)).toMatchObject({
        error: {
          code: "upstream_error",
          message: expect.stringContaining("upstream.max_response_bytes (262144)"),
        },
      });
    }
    // max_inflight 1 and the second request got in: the first one's slot was given back.
    expect(gw.gateway.runtime.registry.get("only")!.inflight).toBe(0);
    await dropped;
    expect(aborted).toBe(2); // the engine's connection was dropped: it stops generating
  });

  it("a declared Content-Length past the limit is refused before reading the body", async () => {
    const engine = await startScriptedEngine({
      completion: ({ res }) => {
        res.writeHead(200, { "content-type": "application/json", "content-length": 10_000_000 });
        res.write("{");
      },
    });
    closers.push(() => engine.close());
    const gw = await startGatewayFor([{ id: "only", url: engine.url }], {
      upstream: { max_response_bytes: 1_000_000 },
    });
    closers.push(() => gw.close());
    const answer = await post(gw.url);
    expect(answer.status).toBe(502);
    expect(answer.text).toContain("answered 10000000 bytes");
  });

  it("a 200 answer that is not JSON is a 502 naming it, after a retry on another engine", async () => {
    const html = await startScriptedEngine({
      completion: ({ res }) => res.writeHead(200, { "content-type": "text/html" }).end("<html>oops</html>"),
    });
    const good = await startScriptedEngine({ completion: ({ res }) => answerOk(res) });
    closers.push(
      () => html.close(),
      () => good.close(),
    );
    const alone = await startGatewayFor([{ id: "html", url: html.url }]);
    closers.push(() => alone.close());
    const answer = await post(alone.url);
    expect(answer.status).toBe(502);
    expect(JSON.parse(answer.text)).toMatchObject({
      error: {
        code: "upstream_error",
        message: expect.stringContaining("not a JSON object (content-type text/html)"),
      },
    });

    const pair = await startGatewayFor([
      { id: "html", url: html.url },
      { id: "good", url: good.url },
    ]);
    closers.push(() => pair.close());
    const backends = pair.gateway.runtime.registry.tier("small");
    let session = "";
    for (let i = 0; session === ""; i++)
      if (pair.gateway.runtime.scheduler.ranking(`n-${i}`, backends)[0]!.id === "html") session = `n-${i}`;
    const retried = await post(pair.url, undefined, { "x-session-id": session });
    expect(retried.status).toBe(200);
    expect(retried.headers.get("x-agent-serve-backend")).toBe("good");
  });

  it("passes on an engine's Retry-After with its 429, and with a 503 when every attempt got one", async () => {
    const limited = await startScriptedEngine({
      completion: ({ res }) =>
        res
          .writeHead(429, { "content-type": "application/json", "retry-after": "7" })
          .end('{"error":{"message":"slow down","type":"rate_limit","code":429}}'),
    });
    const overloaded = await startScriptedEngine({
      completion: ({ res }) =>
        res.writeHead(503, { "content-type": "application/json", "retry-after": "12" }).end("{}"),
    });
    closers.push(
      () => limited.close(),
      () => overloaded.close(),
    );
    const a = await startGatewayFor([{ id: "limited", url: limited.url }]);
    const b = await startGatewayFor([{ id: "overloaded", url: overloaded.url }]);
    closers.push(
      () => a.close(),
      () => b.close(),
    );
    const r429 = await post(a.url);
    expect(r429.status).toBe(429);
    expect(r429.headers.get("retry-after")).toBe("7");
    const r503 = await post(b.url);
    expect(r503.status).toBe(503);
    expect(r503.headers.get("retry-after")).toBe("12");
    expect(JSON.parse(r503.text)).toMatchObject({ error: { code: "upstream_error" } });
  });
});
