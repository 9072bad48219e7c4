// The floor proxy plus the least any gateway with agent-serve's contract must do per request, and nothing
// more: parse the request body (to read its model and messages), give the request an id, parse the engine's
// answer (for its usage), splice a metadata member into it, send a few headers, observe one histogram and
// one counter (prom-client) and write one access-log line (pino, batched as the gateway's logger is). A
// stream is relayed chunk by chunk, with the id, the histogram and the log line but no parsing. No
// admission, routing, retries, budgets, timeouts or health. The overhead benchmark measures it beside the
// floor proxy and the gateway: the gap from the floor to it is the cost of those duties on this stack, the
// gap from it to the gateway the cost of everything else.
//
//   node --import tsx bench/overhead/duties-proxy.ts PORT UPSTREAM_URL
import { randomUUID } from "node:crypto";
import { createServer } from "node:http";
import { pino } from "pino";
import { Counter, Histogram, Registry } from "prom-client";
import { Pool, type Dispatcher } from "undici";

const [port, upstream] = [Number(process.argv[2]), process.argv[3]!];
const pool = new Pool(upstream, { connections: 1024, pipelining: 1 });
const log = pino({ name: "duties" }, pino.destination({ dest: 1, sync: false, minLength: 4096 }));
const registry = new Registry();
const seconds = new Histogram({
  name: "request_seconds",
  help: "request duration",
  labelNames: ["tier", "backend", "status"],
  buckets: [0.005, 0.05, 0.5, 5, 50],
  registers: [registry],
});
const tokens = new Counter({
  name: "prompt_tokens_total",
  help: "prompt tokens",
  labelNames: ["tier"],
  registers: [registry],
});

/** A bad body must not stop the benchmark's reference proxy: undefined instead of a throw. */
function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

interface ChatBody {
  model?: unknown;
  messages?: unknown;
}

createServer({ noDelay: true, keepAlive: true }, (req, res) => {
  const startedMs = performance.now();
  const requestId = randomUUID();
  const body: Buffer[] = [];
  req.on("data", (chunk: Buffer) => body.push(chunk));
  req.on("end", () => {
    const raw = Buffer.concat(body);
    if (req.method !== "POST") {
      res.end("ok"); // the benchmark's readiness probe
      return;
    }
    const parsed = parseJson(raw.toString("utf8")) as ChatBody | undefined;
    if (typeof parsed?.model !== "string" || !Array.isArray(parsed.messages)) {
      res.writeHead(400).end();
      return;
    }
    const session = req.headers["x-session-id"];
    const chunks: Buffer[] = [];
    let status = 0;
    let streaming = false;
    const done = (): void => {
      seconds.labels("small", "e0", String(status)).observe((performance.now() - startedMs) / 1000);
      log.info({ reqId: requestId, method: req.method, path: req.url, status, session }, "request");
    };
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart() {},
      onResponseStart(_controller, statusCode, headers) {
        status = statusCode;
        streaming = String(headers["content-type"]).startsWith("text/event-stream");
        if (streaming)
          res.writeHead(status, ["content-type", "text/event-stream", "x-request-id", requestId]);
      },
      onResponseData(_controller, chunk) {
        if (streaming) res.write(chunk);
        else chunks.push(chunk);
      },
      onResponseEnd() {
        if (streaming) {
          res.end();
          done();
          return;
        }
        const text = Buffer.concat(chunks).toString("utf8");
        const answer = parseJson(text) as { usage?: { prompt_tokens?: number } } | undefined;
        const member = `,"x_agent_serve":{"backend":"e0","session_id":${JSON.stringify(session ?? null)}}}`;
        const out = Buffer.from(text.slice(0, text.lastIndexOf("}")) + member);
        res.writeHead(status, [
          "content-type",
          "application/json",
          "content-length",
          String(out.length),
          "x-request-id",
          requestId,
          "x-agent-serve-backend",
          "e0",
        ]);
        res.end(out);
        tokens.labels("small").inc(answer?.usage?.prompt_tokens ?? 0);
        done();
      },
      onResponseError(_controller, error) {
        if (!res.headersSent) res.writeHead(502);
        res.end(String(error));
      },
    };
    pool.dispatch(
      { path: req.url ?? "/", method: "POST", headers: { "content-type": "application/json" }, body: raw },
      handler,
    );
  });
}).listen(port, "127.0.0.1");
