// Every bad input of the contract gets its status and the OpenAI envelope, and the gateway keeps serving.
import { request } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SMALL_MODEL, chat, startCluster, type Cluster } from "../helpers/cluster.js";

interface Case {
  name: string;
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  status: number;
  code: string;
}

const chatBody = JSON.stringify({
  model: SMALL_MODEL,
  messages: [{ role: "user", content: "hi" }],
  max_tokens: 4,
});

const CASES: Case[] = [
  { name: "malformed JSON", body: "{not json", status: 400, code: "invalid_json" },
  {
    name: "non-UTF-8 body",
    body: Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
    status: 400,
    code: "invalid_json",
  },
  { name: "JSON that is not an object", body: "[1,2,3]", status: 400, code: "invalid_request" },
  {
    name: "messages missing",
    body: JSON.stringify({ model: SMALL_MODEL }),
    status: 400,
    code: "invalid_request",
  },
  {
    name: "messages of wrong type",
    body: JSON.stringify({ model: SMALL_MODEL, messages: "hi" }),
    status: 400,
    code: "invalid_request",
  },
  {
    name: "message without role",
    body: JSON.stringify({ messages: [{ content: "x" }] }),
    status: 400,
    code: "invalid_request",
  },
  {
    name: "model of wrong type",
    body: JSON.stringify({ model: 7, messages: [{ role: "user", content: "x" }] }),
    status: 400,
    code: "invalid_request",
  },
  {
    name: "stream of wrong type",
    body: JSON.stringify({ messages: [{ role: "user", content: "x" }], stream: "yes" }),
    status: 400,
    code: "invalid_request",
  },
  {
    name: "unknown model",
    body: JSON.stringify({ model: "gpt-17", messages: [{ role: "user", content: "x" }] }),
    status: 404,
    code: "model_not_found",
  },
  {
    name: "unknown tier hint",
    headers: { "x-tier-hint": "huge" },
    body: chatBody,
    status: 404,
    code: "tier_not_found",
  },
  {
    name: "session id too long",
    headers: { "x-session-id": "s".repeat(257) },
    body: chatBody,
    status: 400,
    code: "invalid_header",
  },
  {
    name: "session id with a control character",
    headers: { "x-session-id": "a\tb" },
    body: chatBody,
    status: 400,
    code: "invalid_header",
  },
  {
    name: "session id with non-ASCII",
    headers: { "x-session-id": "sessi\u00f6n" },
    body: chatBody,
    status: 400,
    code: "invalid_header",
  },
  {
    name: "body too large",
    body: JSON.stringify({ messages: [{ role: "user", content: "x".repeat(70_000) }] }),
    status: 413,
    code: "body_too_large",
  },
  {
    name: "completions without prompt",
    path: "/v1/completions",
    body: JSON.stringify({ model: SMALL_MODEL }),
    status: 400,
    code: "invalid_request",
  },
  { name: "unknown path", path: "/v1/embeddingz", status: 404, code: "not_found" },
  {
    name: "wrong method",
    method: "GET",
    path: "/v1/chat/completions",
    status: 405,
    code: "method_not_allowed",
  },
  {
    name: "admin disabled without a token",
    method: "GET",
    path: "/admin/backends",
    status: 403,
    code: "forbidden",
  },
];

/** Raw node:http, so that headers fetch would refuse (control characters, non-ASCII) can be sent. */
function send(url: string, c: Case): Promise<{ status: number; body: string }> {
  const target = new URL(c.path ?? "/v1/chat/completions", url);
  return new Promise((resolve, reject) => {
    const req = request(
      target,
      { method: c.method ?? "POST", headers: { "content-type": "application/json", ...c.headers } },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (chunk: string) => (body += chunk));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      },
    );
    req.on("error", reject);
    req.end(c.body);
  });
}

describe("hostile and malformed input", () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small" }], { server: { max_body_bytes: 65_536 } });
  });
  afterAll(() => cluster.close());

  for (const c of CASES) {
    it(`${c.name} -> ${c.status} ${c.code}`, async () => {
      const { status, body } = await send(cluster.url, c);
      expect(status).toBe(c.status);
      const envelope = JSON.parse(body) as { error: Record<string, unknown> };
      expect(envelope.error).toMatchObject({ code: c.code });
      expect(typeof envelope.error["message"]).toBe("string");
      expect(typeof envelope.error["type"]).toBe("string");
      expect("param" in envelope.error).toBe(true);
    });
  }

  it("a request cut off mid-body does not hurt the gateway", async () => {
    const target = new URL("/v1/chat/completions", cluster.url);
    await new Promise<void>((resolve) => {
      const req = request(target, { method: "POST", headers: { "content-length": "1000" } });
      req.on("error", () => resolve());
      req.write('{"messages": [');
      setImmediate(() => {
        req.destroy();
        resolve();
      });
    });
    expect((await chat(cluster.url, { session: "after-cut" })).status).toBe(200);
  });

  it("an engine's own 4xx is relayed with its status in the OpenAI envelope", async () => {
    const { status, json } = await chat(cluster.url, { maxTokens: 10_000_000 });
    expect(status).toBe(400);
    expect(json).toMatchObject({ error: { type: expect.any(String), message: expect.any(String) } });
  });

  it("keeps serving after all of the above", async () => {
    const { status, json } = await chat(cluster.url, { session: "still-alive" });
    expect(status).toBe(200);
    expect(json["x_agent_serve"]).toBeDefined();
  });
});
