// Clients that send their request too slowly (slowloris): a 408 in the OpenAI envelope, the connection closed,
// the gateway serving everyone else.
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load.js";
import {
  answerOk,
  post,
  startGatewayFor,
  startScriptedEngine,
  type ScriptedEngine,
  type TestGateway,
} from "../helpers/faulty-engine.js";
import { metricValue, scrape } from "../helpers/cluster.js";

const STALLED_BODY =
  "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n" +
  'content-length: 60\r\n\r\n{"model":"m",';
const REST_OF_BODY = '"messages":[{"role":"user","content":"hi"}]}'.padEnd(47, " ");

/** Connects, writes `text`, and resolves with everything answered once the gateway closed the connection. */
function sendAndStall(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let answer = "";
    socket.on("data", (c: Buffer) => (answer += c.toString()));
    socket.on("close", () => resolve(answer));
    socket.on("error", (err: NodeJS.ErrnoException) =>
      err.code === "ECONNRESET" ? resolve(answer) : reject(err),
    );
    socket.write(text);
  });
}

describe("slow clients", () => {
  let engine: ScriptedEngine;
  let gw: TestGateway;
  let port: number;
  const rejections = async () =>
    metricValue(await scrape(gw.url), "agentserve_rejections_total", { reason: "request_timeout" });

  beforeAll(async () => {
    engine = await startScriptedEngine({ completion: ({ res }) => answerOk(res) });
    // Short timeouts so that the test waits for the gateway's own timers, not for the defaults (20 s, 60 s).
    gw = await startGatewayFor([{ id: "e0", url: engine.url }], {
      server: { headers_timeout_seconds: 0.3, receive_timeout_seconds: 0.6 },
    });
    port = Number(new URL(gw.url).port);
  });
  afterAll(async () => {
    await gw.close();
    await engine.close();
  });

  it("answers 408 to a client that never finishes its headers, and closes the connection", async () => {
    const before = await rejections();
    const answer = await sendAndStall(port, "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n");
    expect(answer).toMatch(/^HTTP\/1.1 408 /);
    expect(answer).toContain("connection: close");
    const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as { error: { code: string } };
    expect(body.error.code).toBe("request_timeout");
    expect(await rejections()).toBe(before + 1);
  });

  it("answers 408 to a client that stops in the middle of its body, and no engine sees the request", async () => {
    const before = engine.completions;
    const requests = async (status: string) =>
      metricValue(await scrape(gw.url), "agentserve_requests_total", {
        tier: "none",
        backend: "none",
        status,
      });
    const [timedOut, left] = [await requests("408"), await requests("499")];
    const answer = await sendAndStall(port, STALLED_BODY);
    expect(answer).toMatch(/^HTTP\/1.1 408 /);
    expect(answer).toContain('"code":"request_timeout"');
    expect(engine.completions).toBe(before);
    // The request's own record says what the client was told, not that the client left.
    expect(await requests("408")).toBe(timedOut + 1);
    expect(await requests("499")).toBe(left);
  });

  it("closes the connection after the 408: what the client sends after it is never served", async () => {
    const before = engine.completions;
    const late = `${REST_OF_BODY}POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}`;
    const served = engine.after("completion").then(() => "the engine got a request");
    // The client keeps its side open after the gateway's (half-open, as some clients do): once it has the
    // 408 it sends the rest of the body and a next request. A closed connection answers its next writes with
    // an error; a half-closed one would read on and serve them. The blank lines written after it are what
    // HTTP allows between requests, so they change nothing for a gateway that reads on.
    const closed = new Promise<string>((resolve) => {
      const socket = connect({ port, host: "127.0.0.1", allowHalfOpen: true });
      let answer = "";
      let probes = 0;
      const probe = (): void => {
        if (++probes <= 1000) socket.write("\r\n", (err) => (err ? resolve(answer) : setImmediate(probe)));
      };
      socket.on("data", (c: Buffer) => (answer += c.toString()));
      socket.once("end", () => socket.write(late, (err) => (err ? resolve(answer) : probe())));
      socket.on("error", () => resolve(answer));
      socket.on("close", () => resolve(answer));
      socket.write(STALLED_BODY);
    });
    const outcome = await Promise.race([closed, served]);
    expect(outcome).not.toBe("the engine got a request");
    expect(outcome).toMatch(/^HTTP\/1.1 408 /);
    expect(outcome.match(/HTTP\/1.1 /g)).toHaveLength(1);
    expect(engine.completions).toBe(before);
  });

  it("keeps serving other clients meanwhile", async () => {
    const [stalled, served] = await Promise.all([
      sendAndStall(port, "GET /healthz HTTP/1.1\r\n"),
      post(gw.url),
    ]);
    expect(stalled).toMatch(/^HTTP\/1.1 408 /);
    expect(served.status).toBe(200);
  });

  it("takes timeouts that are not whole milliseconds, and new ones at a reload", async () => {
    // 2.01 s is 2009.9999999999998 ms in floating point, which node's server refuses.
    const server = { headers_timeout_seconds: 2.01, receive_timeout_seconds: 2.03 };
    const [kept, reloaded] = await Promise.all([
      startGatewayFor([{ id: "e0", url: engine.url }], { server }),
      startGatewayFor([{ id: "e0", url: engine.url }], { server }),
    ]);
    try {
      const config = parseConfig(
        {
          ...reloaded.config,
          server: { ...reloaded.config.server, headers_timeout_seconds: 0.25, receive_timeout_seconds: 0.5 },
        },
        "reload",
      );
      reloaded.gateway.reload(config);
      // Two stalled clients at once: the reloaded gateway's 408 comes first (an order, not a duration).
      const order: string[] = [];
      const stall = (gw: TestGateway, name: string) =>
        sendAndStall(Number(new URL(gw.url).port), "GET /healthz HTTP/1.1\r\n").then((answer) => {
          order.push(name);
          return answer;
        });
      const answers = await Promise.all([stall(kept, "kept"), stall(reloaded, "reloaded")]);
      for (const answer of answers) expect(answer).toMatch(/^HTTP\/1.1 408 /);
      expect(order).toEqual(["reloaded", "kept"]);
    } finally {
      await Promise.all([kept.close(), reloaded.close()]);
    }
  });
});
