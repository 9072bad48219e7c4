// upstream.stream_stall_seconds measures the engine's silence, not the client's: a client that stops reading
// (its socket full, the engine's paused) for longer than the stall time still gets the whole answer.
import { request } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import { startGatewayFor, startScriptedEngine } from "../../helpers/faulty-engine.js";

describe("stream stall", () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  it("a client that stops reading is not a stalled engine", async () => {
    const piece = "x".repeat(2000);
    const chunks = 7000; // about 14 MB: more than the sockets between client and engine hold
    const engine = await startScriptedEngine({
      completion: ({ res }) => {
        res.writeHead(200, { "content-type": "text/event-stream" });
        let sent = 0;
        const more = (): void => {
          while (sent < chunks) {
            sent++;
            const event = `data: ${JSON.stringify({ id: "c", choices: [{ index: 0, delta: { content: piece }, finish_reason: null }] })}\n\n`;
            if (!res.write(event)) return void res.once("drain", more);
          }
          res.end(
            'data: {"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n',
          );
        };
        more();
      },
    });
    closers.push(() => engine.close());
    const gw = await startGatewayFor([{ id: "only", url: engine.url }], {
      upstream: { stream_stall_seconds: 0.2 },
    });
    closers.push(() => gw.close());
    const url = new URL(gw.url);
    const body = await new Promise<string>((resolve, reject) => {
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          path: "/v1/chat/completions",
          method: "POST",
          headers: { "content-type": "application/json" },
        },
        (res) => {
          // Stop reading once the first bytes arrive, for longer than the stall time; then read it all.
          res.pause();
          const parts: Buffer[] = [];
          res.once("readable", () => {
            setTimeout(() => {
              res.on("data", (c: Buffer) => parts.push(c));
              res.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
              res.resume();
            }, 800);
          });
        },
      );
      req.on("error", reject);
      req.end(JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "go" }] }));
    });
    expect(body).not.toContain('"error"');
    expect(body.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(body.split(piece).length - 1).toBe(chunks);
  });
});
