// Refused uploads are answered to clients still writing: a 16 MB body over the limit reads its 413, oversized
// headers their 431, through node:http, the openai SDK and a client that writes everything before reading.
import { request } from "node:http";
import { connect } from "node:net";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  answerOk,
  startGatewayFor,
  startScriptedEngine,
  type ScriptedEngine,
  type TestGateway,
} from "../helpers/faulty-engine.js";

/** Over the 8 MiB default max_body_bytes and over the gateway's 16 MiB drain bound. */
const UPLOAD_BYTES = 17 * 1024 * 1024;

function chatBody(bytes: number): Buffer {
  const head = '{"model":"m","messages":[{"role":"user","content":"';
  const tail = '"}]}';
  return Buffer.concat([
    Buffer.from(head),
    Buffer.alloc(bytes - head.length - tail.length, 0x61),
    Buffer.from(tail),
  ]);
}

interface Answer {
  status: number;
  text: string;
}

/** node:http: `chunks` bodies go out with Transfer-Encoding chunked, one Buffer with its Content-Length. */
function nodeHttp(
  url: string,
  body: Buffer,
  options: { chunked?: boolean; headers?: Record<string, string> } = {},
): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}/v1/chat/completions`,
      {
        method: "POST",
        headers: {
          "content-type": "application/json",
          ...(options.chunked === true
            ? { "transfer-encoding": "chunked" }
            : { "content-length": String(body.length) }),
          ...options.headers,
        },
      },
      (res) => {
        let text = "";
        res.on("data", (c: Buffer) => (text += c.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on("error", reject);
    if (options.chunked === true) {
      for (let at = 0; at < body.length; at += 1024 * 1024) req.write(body.subarray(at, at + 1024 * 1024));
      req.end();
    } else req.end(body);
  });
}

/** A client that writes its whole request before reading a byte of the answer. */
function writeFirst(port: number, head: string, body: Buffer): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    socket.pause();
    let text = "";
    socket.on("data", (c: Buffer) => (text += c.toString()));
    socket.on("error", () => resolve(text));
    socket.on("close", () => resolve(text));
    socket.write(head);
    socket.write(body, () => socket.resume());
  });
}

describe("refused uploads", () => {
  let engine: ScriptedEngine;
  let gw: TestGateway;
  let port: number;
  beforeAll(async () => {
    engine = await startScriptedEngine({ completion: ({ res }) => answerOk(res) });
    gw = await startGatewayFor([{ id: "only", url: engine.url }]);
    port = Number(new URL(gw.url).port);
  });
  afterAll(async () => {
    await gw.close();
    await engine.close();
  });

  it("node:http uploading 17 MiB (Content-Length or chunked) reads its 413 envelope", async () => {
    const body = chatBody(UPLOAD_BYTES);
    for (let round = 0; round < 4; round++) {
      const answer = await nodeHttp(gw.url, body, { chunked: round % 2 === 1 });
      expect(answer.status).toBe(413);
      expect(JSON.parse(answer.text)).toMatchObject({
        error: { code: "body_too_large", type: "invalid_request_error" },
      });
    }
    expect(engine.completions).toBe(0);
  });

  it("the openai SDK (retries off) gets the 413 as an APIError, not a connection error", async () => {
    const client = new OpenAI({ baseURL: `${gw.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const content = "a".repeat(16 * 1000 * 1000);
    for (let round = 0; round < 3; round++) {
      const error = await client.chat.completions
        .create({ model: "m", messages: [{ role: "user", content }] })
        .then(
          () => undefined,
          (err: unknown) => err,
        );
      expect(error).toBeInstanceOf(OpenAI.APIError);
      expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(413);
      expect((error as InstanceType<typeof OpenAI.APIError>).code).toBe("body_too_large");
    }
  });

  it("a client that writes 40 MiB before reading still reads the 413 (the gateway lingers past its drain bound)", async () => {
    // Cut at the 16 MiB drain bound, such a client got a reset while writing and never read its answer.
    const body = chatBody(40 * 1024 * 1024);
    for (let round = 0; round < 3; round++) {
      const head =
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n" +
        `content-length: ${body.length}\r\n\r\n`;
      const answer = await writeFirst(port, head, body);
      expect(answer).toMatch(/^HTTP\/1.1 413/);
      expect(answer).toContain('"code":"body_too_large"');
    }
  });

  it("a request sent after a body cut at the drain bound is never served", async () => {
    const body = chatBody(UPLOAD_BYTES);
    const next =
      "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";
    const head =
      "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n" +
      `content-length: ${body.length}\r\n\r\n`;
    const answer = await writeFirst(port, head, Buffer.concat([body, Buffer.from(next)]));
    expect(answer).toMatch(/^HTTP\/1.1 413/);
    expect(answer.match(/HTTP\/1.1 /g)).toHaveLength(1);
    expect(engine.completions).toBe(0);
  });

  it("oversized headers get their 431 envelope while the client still writes its body", async () => {
    const body = chatBody(4 * 1024 * 1024);
    const big = { "x-padding": "p".repeat(20 * 1024) };
    for (let round = 0; round < 3; round++) {
      const answer = await nodeHttp(gw.url, body, { headers: big });
      expect(answer.status).toBe(431);
      expect(JSON.parse(answer.text)).toMatchObject({ error: { code: "header_too_large" } });
      const head =
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n" +
        `x-padding: ${big["x-padding"]}\r\ncontent-length: ${body.length}\r\n\r\n`;
      const raw = await writeFirst(port, head, body);
      expect(raw).toMatch(/^HTTP\/1.1 431/);
      expect(raw).toContain('"code":"header_too_large"');
    }
    expect(engine.completions).toBe(0);
  });
});
