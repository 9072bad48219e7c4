// Honest statuses for hostile or odd requests: duplicate identity headers, deep JSON, framing, methods, auth.
import { request } from "node:http";
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/gateway/client-auth.js";
import {
  answerOk,
  startGatewayFor,
  startScriptedEngine,
  type ScriptedEngine,
  type TestGateway,
} from "../helpers/faulty-engine.js";

const TOKEN = "statuses-admin-token-012345";
const BODY = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] });

/** Sends raw bytes (connection: close) and resolves with everything the gateway answered. */
function raw(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    let answer = "";
    socket.on("data", (c: Buffer) => (answer += c.toString()));
    socket.on("end", () => resolve(answer));
    socket.on("close", () => resolve(answer));
    socket.on("error", reject);
    socket.write(text);
  });
}

/** Whether `text` holds a whole HTTP answer with a Content-Length body. */
function wholeAnswer(text: string): boolean {
  const end = text.indexOf("\r\n\r\n");
  const length = /\r\ncontent-length: (\d+)/i.exec(text);
  return end >= 0 && length !== null && Buffer.byteLength(text.slice(end + 4)) >= Number(length[1]);
}

/** One request through node:http, whose header arrays become repeated header lines. */
function send(
  url: string,
  path: string,
  headers: Record<string, string | string[]>,
  body = BODY,
): Promise<{ status: number; json: { error?: { code: string; message: string; param: string | null } } }> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${url}${path}`,
      { method: "POST", headers: { "content-type": "application/json", ...headers } },
      (res) => {
        let text = "";
        res.on("data", (c: Buffer) => (text += c.toString()));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) as never }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

describe("statuses", () => {
  let engine: ScriptedEngine;
  let gw: TestGateway;
  let keyed: TestGateway;
  let port: number;
  beforeAll(async () => {
    engine = await startScriptedEngine({ completion: ({ res }) => answerOk(res) });
    gw = await startGatewayFor([{ id: "only", url: engine.url }], {
      server: { admin_token: TOKEN, max_body_bytes: 1024 * 1024 },
      routing: {},
    });
    keyed = await startGatewayFor([{ id: "only", url: engine.url }], {
      server: { api_keys: [{ sha256: sha256Hex("sk-one") }] },
    });
    port = Number(new URL(gw.url).port);
  });
  afterAll(async () => {
    await gw.close();
    await keyed.close();
    await engine.close();
  });

  it.each(["x-session-id", "x-agent-id", "x-tier-hint"])("a repeated %s is 400 naming it", async (name) => {
    const answer = await send(gw.url, "/v1/chat/completions", { [name]: ["a", "a"] });
    expect(answer.status).toBe(400);
    expect(answer.json.error).toMatchObject({ code: "invalid_header", param: name });
  });

  it("a repeated Authorization is 400; with keys, a missing key is 401 before any other check, on every /v1 route", async () => {
    const twice = await send(keyed.url, "/v1/chat/completions", {
      authorization: ["Bearer sk-one", "Bearer sk-one"],
    });
    expect(twice.status).toBe(400);
    expect(twice.json.error).toMatchObject({ code: "invalid_header", param: "authorization" });
    const badSession = await send(keyed.url, "/v1/chat/completions", { "x-session-id": ["a", "b"] });
    expect(badSession.status).toBe(401);
    expect((await fetch(`${keyed.url}/v1/models`)).status).toBe(401);
    expect((await fetch(`${keyed.url}/v1/nothing`)).status).toBe(401);
    const models = await fetch(`${keyed.url}/v1/models`, { headers: { authorization: "Bearer sk-one" } });
    expect(models.status).toBe(200);
  });

  it("JSON nested 100,000 deep is 400 naming the limit, also when the body must be rewritten", async () => {
    const deep = `{"model":"other","x":${"[".repeat(100_000)}${"]".repeat(100_000)},"messages":[{"role":"user","content":"hi"}]}`;
    const answer = await send(gw.url, "/v1/chat/completions", { "x-tier-hint": "small" }, deep);
    expect(answer.status).toBe(400);
    expect(answer.json.error?.message).toContain("deeper than 128 levels");
  });

  it("a malformed %-escape in an admin path is 400", async () => {
    const answer = await fetch(`${gw.url}/admin/backends/%E0%A4%A`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(answer.status).toBe(400);
    expect(await answer.json()).toMatchObject({ error: { code: "invalid_request" } });
  });

  it("an engine that cannot be reached is described in the gateway's words, not the library's", async () => {
    const gone = await startScriptedEngine({ completion: ({ res }) => answerOk(res) });
    const url = gone.url;
    await gone.close();
    const lonely = await startGatewayFor([{ id: "gone", url }], { upstream: { max_attempts: 1 } });
    const answer = await send(lonely.url, "/v1/chat/completions", {});
    await lonely.close();
    expect(answer.status).toBe(502);
    expect(answer.json.error?.message).toMatch(/^backend gone refused the connection; 1 attempt/);
    expect(answer.json.error?.message).not.toMatch(/UND_ERR|ECONN/);
  });

  it("Transfer-Encoding other than chunked is 501; unserved methods are 501 with an envelope; CONNECT is answered", async () => {
    const gzip = await raw(
      port,
      "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n" +
        "transfer-encoding: gzip, chunked\r\nconnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    );
    expect(gzip).toMatch(/^HTTP\/1.1 501/);
    expect(gzip).toContain('"code":"not_implemented"');
    const propfind = await raw(port, "PROPFIND / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    expect(propfind).toMatch(/^HTTP\/1.1 501/);
    expect(propfind).toContain('"error":{');
    const tunnel = await raw(port, "CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\n\r\n");
    expect(tunnel).toMatch(/^HTTP\/1.1 501/);
    expect(tunnel).toContain('"code":"not_implemented"');
  });

  it("a client that sends its whole over-limit body before reading still reads the 413", async () => {
    // Many clients write the request out before they read a byte of the answer. Closing the connection on
    // them with their body unread makes the kernel reset it, and the reset throws away the 413 they had not
    // read yet; the gateway reads on (within its drain bound) so that the answer survives.
    for (let round = 0; round < 3; round++) {
      const answer = await new Promise<string>((resolve) => {
        const socket = connect(port, "127.0.0.1");
        socket.pause();
        let text = "";
        socket.on("data", (c: Buffer) => {
          text += c.toString();
          // The connection may stay open (keep-alive): done once the whole answer is in.
          if (wholeAnswer(text)) socket.destroy();
        });
        socket.on("error", () => resolve(text));
        socket.on("close", () => resolve(text));
        const size = 4 * 1024 * 1024; // over this gateway's 1 MiB limit, under its 16 MiB drain bound
        socket.write(
          `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n` +
            `content-length: ${size}\r\n\r\n`,
        );
        // Reads only once the whole body has left (the write callback), as such a client does.
        socket.write(Buffer.alloc(size, 0x61), () => socket.resume());
      });
      expect(answer).toMatch(/^HTTP\/1.1 413/);
    }
  });

  it("a client uploading 100 MB reads its 413 (the gateway drains a bounded amount before closing)", async () => {
    for (let round = 0; round < 6; round++) {
      const answer = await new Promise<string>((resolve) => {
        const socket = connect(port, "127.0.0.1");
        let text = "";
        let sent = 0;
        const chunked = round % 2 === 1; // no Content-Length: the gateway finds out while reading
        const data = Buffer.alloc(64 * 1024, 0x61);
        const chunk = chunked ? Buffer.concat([Buffer.from("10000\r\n"), data, Buffer.from("\r\n")]) : data;
        const pump = (): void => {
          while (sent < 100 * 1024 * 1024 && !socket.destroyed) {
            sent += chunk.length;
            if (!socket.write(chunk)) return void socket.once("drain", pump);
          }
        };
        socket.on("data", (c: Buffer) => (text += c.toString()));
        socket.on("error", () => undefined);
        socket.on("close", () => resolve(text));
        socket.write(
          `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n` +
            (chunked ? "transfer-encoding: chunked\r\n\r\n" : `content-length: ${100 * 1024 * 1024}\r\n\r\n`),
        );
        pump();
      });
      expect(answer).toMatch(/^HTTP\/1.1 413/);
    }
  });
});
