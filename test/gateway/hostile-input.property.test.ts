// Random hostile requests, as raw bytes on a socket: never a crash, never a 5xx of the gateway's own making,
// always the OpenAI envelope on errors, and the gateway keeps serving.
import { connect } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SMALL_MODEL, chat, startCluster, type Cluster } from "../helpers/cluster.js";

interface RawResponse {
  status: number;
  body: string;
}

/**
 * Sends bytes, reads until the server closes (every request says `connection: close`); resolves with the
 * status line's code and the body. `hangUp` half-closes after writing: a client that leaves mid-body.
 */
function rawRequest(port: number, bytes: Buffer, hangUp = false): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    const chunks: Buffer[] = [];
    socket.on("data", (chunk) => chunks.push(chunk));
    socket.on("error", (err: NodeJS.ErrnoException) => (err.code === "ECONNRESET" ? finish() : reject(err)));
    socket.on("end", finish);
    socket.write(bytes);
    if (hangUp) socket.end();
    let done = false;
    function finish(): void {
      if (done) return;
      done = true;
      // Only the first response counts: stray bytes after a short body may be answered as a second request.
      const text = Buffer.concat(chunks).toString("latin1");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      const split = text.indexOf("\r\n\r\n");
      const length = Number(/\r\ncontent-length: (\d+)/i.exec(text.slice(0, split))?.[1] ?? Number.NaN);
      const rest = split < 0 ? "" : text.slice(split + 4);
      resolve({ status, body: Number.isNaN(length) ? rest : rest.slice(0, length) });
    }
  });
}

const METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "BREW", "post"];
const PATHS = [
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/models",
  "/healthz",
  "/readyz",
  "/metrics",
  "/admin/backends",
  "/admin/sessions/x",
  "/",
  "/v1/../etc/passwd",
  "/%00",
  "/v1/chat/completions?x=1",
];

const jsonValue = fc.jsonValue({ maxDepth: 4 });
const chatLike = fc.record(
  {
    model: fc.oneof(fc.constant(SMALL_MODEL), fc.string(), fc.integer(), fc.constant(null)),
    messages: fc.oneof(
      fc.array(
        fc.record({
          role: fc.oneof(fc.constant("user"), fc.string()),
          content: fc.oneof(fc.string(), jsonValue),
        }),
        { maxLength: 4 },
      ),
      jsonValue,
    ),
    max_tokens: fc.oneof(fc.integer({ min: -5, max: 64 }), fc.string(), fc.constant(1e12)),
    stream: fc.oneof(fc.boolean(), fc.string(), fc.constant(null)),
  },
  { requiredKeys: [] },
);
/** Well-formed requests with odd content: these reach the engines, streaming or not. */
const validChat = fc.record({
  model: fc.constantFrom(SMALL_MODEL, "auto", "sim-big"),
  messages: fc.array(
    fc.record({
      role: fc.constantFrom("system", "user", "assistant", "tool"),
      content: fc.string({ maxLength: 200 }),
    }),
    { minLength: 1, maxLength: 4 },
  ),
  max_tokens: fc.integer({ min: 1, max: 16 }),
  stream: fc.boolean(),
});
const body = fc.oneof(
  validChat.map((value) => Buffer.from(JSON.stringify(value))),
  chatLike.map((value) => Buffer.from(JSON.stringify(value))),
  jsonValue.map((value) => Buffer.from(JSON.stringify(value))),
  fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes)),
  fc.nat({ max: 3000 }).map((depth) => Buffer.from("[".repeat(depth) + "]".repeat(depth))),
  fc.constant(Buffer.alloc(0)),
);
const headerValue = fc.oneof(
  { weight: 3, arbitrary: fc.stringMatching(/^[a-z0-9-]{1,24}$/) },
  fc.string({ maxLength: 40 }),
  fc.string({ minLength: 250, maxLength: 300 }),
  fc.uint8Array({ maxLength: 20 }).map((bytes) => Buffer.from(bytes).toString("latin1")),
);
interface HostileRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Buffer;
  lengthLie: number;
}

/** Anything at all: any method, any path, any of the headers, any body, a content-length that may lie. */
const anyRequest: fc.Arbitrary<HostileRequest> = fc.record({
  method: fc.constantFrom(...METHODS),
  path: fc.oneof(fc.constantFrom(...PATHS), fc.webPath()),
  headers: fc.dictionary(
    fc.constantFrom(
      "x-session-id",
      "x-agent-id",
      "x-tier-hint",
      "authorization",
      "content-type",
      "x-request-id",
      "transfer-encoding",
      "x-junk",
    ),
    headerValue,
    { maxKeys: 4 },
  ),
  body,
  lengthLie: fc.oneof(
    { weight: 4, arbitrary: fc.constant(0) },
    { weight: 1, arbitrary: fc.integer({ min: -10, max: 10 }) },
  ),
});

/** Completion requests with plausible headers and mostly well-formed bodies: these reach the engines. */
const completionRequest: fc.Arbitrary<HostileRequest> = fc.record({
  method: fc.constant("POST"),
  path: fc.constantFrom("/v1/chat/completions", "/v1/completions"),
  headers: fc.dictionary(fc.constantFrom("x-session-id", "x-agent-id", "x-tier-hint"), headerValue, {
    maxKeys: 2,
  }),
  body: fc.oneof(
    { weight: 3, arbitrary: validChat.map((value) => Buffer.from(JSON.stringify(value))) },
    body,
  ),
  lengthLie: fc.constant(0),
});

const request = fc.oneof(anyRequest, completionRequest);

function encode(r: HostileRequest): Buffer {
  const lines = [`${r.method} ${r.path} HTTP/1.1`, "host: gateway", "connection: close"];
  for (const [name, value] of Object.entries(r.headers))
    lines.push(`${name}: ${value.replace(/[\r\n]/g, " ")}`);
  // A content-length that may lie a little: short bodies are cut, long ones leave stray bytes.
  lines.push(`content-length: ${Math.max(0, r.body.length + (r.lengthLie === 0 ? 0 : r.lengthLie))}`);
  return Buffer.concat([Buffer.from(lines.join("\r\n") + "\r\n\r\n", "latin1"), r.body]);
}

describe("hostile input (property)", () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster(
      [
        { id: "small-0", tier: "small" },
        { id: "big-0", tier: "big" },
      ],
      { server: { max_body_bytes: 65_536 } },
    );
  });
  afterAll(() => cluster.close());

  it("answers every random request with a non-5xx status and, for errors, the OpenAI envelope", async () => {
    const port = Number(new URL(cluster.url).port);
    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(request, async (r) => {
        const response = await rawRequest(port, encode(r), r.lengthLie > 0);
        seen.set(response.status, (seen.get(response.status) ?? 0) + 1);
        // 0: the server closed without a response, acceptable only for bodies that never completed.
        if (response.status === 0) return r.lengthLie > 0;
        expect(response.status).toBeLessThan(500);
        if (response.status >= 400 && r.method !== "HEAD") {
          const envelope = JSON.parse(response.body) as { error: Record<string, unknown> };
          expect(typeof envelope.error.message).toBe("string");
          expect(typeof envelope.error.type).toBe("string");
          expect("code" in envelope.error && "param" in envelope.error).toBe(true);
        }
        return true;
      }),
      { seed: 1234, numRuns: 400 },
    );
    // The generator reaches both the engines (200) and every kind of refusal.
    for (const status of [200, 400, 404]) expect(seen.get(status) ?? 0).toBeGreaterThan(5);
    expect((await chat(cluster.url, { session: "after-the-storm" })).status).toBe(200);
  });

  it("answers oversized headers with 431 and a malformed request line with 400, both enveloped", async () => {
    const port = Number(new URL(cluster.url).port);
    const huge = await rawRequest(
      port,
      Buffer.from(`GET /healthz HTTP/1.1\r\nhost: x\r\nx-big: ${"a".repeat(40_000)}\r\n\r\n`),
    );
    expect(huge.status).toBe(431);
    expect(JSON.parse(huge.body)).toMatchObject({ error: { code: "header_too_large" } });
    const garbage = await rawRequest(port, Buffer.from("\u0001\u0002 nonsense\r\n\r\n", "latin1"));
    expect(garbage.status).toBe(400);
    expect(JSON.parse(garbage.body)).toMatchObject({ error: { code: "invalid_request" } });
  });
});
