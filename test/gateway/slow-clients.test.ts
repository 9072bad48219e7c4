// Clients that send their request too slowly (slowloris): a 408 in the OpenAI envelope, the connection closed,
// the gateway serving everyone else.
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  answerOk,
  post,
  startGatewayFor,
  startScriptedEngine,
  type ScriptedEngine,
  type TestGateway,
} from "../helpers/faulty-engine.js";
import { metricValue, scrape } from "../helpers/cluster.js";

/** Writes `text` and never more; resolves with what the gateway answered once it closed the connection. */
function sendAndStall(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let answer = "";
    socket.on("data", (c: Buffer) => (answer += c.toString()));
    socket.on("close", () => resolve(answer));
    socket.on("error", reject);
    socket.write(text);
  });
}

describe("slow clients", () => {
  let engine: ScriptedEngine;
  let gw: TestGateway;
  let port: number;

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
    const answer = await sendAndStall(port, "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n");
    expect(answer).toMatch(/^HTTP\/1.1 408 /);
    expect(answer).toContain("connection: close");
    const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as { error: { code: string } };
    expect(body.error.code).toBe("request_timeout");
  });

  it("answers 408 to a client that stops in the middle of its body, and no engine sees the request", async () => {
    const before = engine.completions;
    const answer = await sendAndStall(
      port,
      "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n" +
        'content-length: 100\r\n\r\n{"model":"m",',
    );
    expect(answer).toMatch(/^HTTP\/1.1 408 /);
    expect(answer).toContain('"code":"request_timeout"');
    expect(engine.completions).toBe(before);
    // The request's own record says what the client was told, not that the client left.
    const metrics = await scrape(gw.url);
    const requests = (status: string) =>
      metricValue(metrics, "agentserve_requests_total", { tier: "none", backend: "none", status });
    expect(requests("408")).toBe(1);
    expect(requests("499")).toBe(0);
  });

  it("keeps serving other clients, and counts the refusals", async () => {
    const [stalled, served] = await Promise.all([
      sendAndStall(port, "GET /healthz HTTP/1.1\r\n"),
      post(gw.url),
    ]);
    expect(stalled).toMatch(/^HTTP\/1.1 408 /);
    expect(served.status).toBe(200);
    const metrics = await scrape(gw.url);
    expect(metricValue(metrics, "agentserve_rejections_total", { reason: "request_timeout" })).toBe(3);
  });
});
