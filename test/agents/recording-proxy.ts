// A recording proxy: every request is passed on to the upstream (a gateway, or an engine) and its answer streamed
// back; once the answer ends, the request (method, path, headers, body) and the usage the answer reported are
// appended to a JSONL file. Run inside the loopback-only namespace:
// `node --import tsx test/agents/recording-proxy.ts UPSTREAM_URL OUT.jsonl` prints "recording on URL".
import { appendFileSync } from "node:fs";
import { createServer, request as httpRequest, type IncomingMessage } from "node:http";

/** One recorded request: the body parsed when it is JSON, else kept as text. */
export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: unknown;
  status: number;
  /** The prompt tokens and the cached part of them the answer reported (any API, JSON or streamed). */
  usage?: { promptTokens: number; cachedTokens: number };
}

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json =>
  typeof value === "object" && value !== null && !Array.isArray(value);

/** Prompt and cached tokens of one usage object, whichever API wrote it; undefined when it is not one. */
function usageOf(usage: Json): RecordedRequest["usage"] {
  const number = (value: unknown): number => (typeof value === "number" ? value : 0);
  if (typeof usage["prompt_tokens"] === "number") {
    const details = isObject(usage["prompt_tokens_details"]) ? usage["prompt_tokens_details"] : {};
    return { promptTokens: usage["prompt_tokens"], cachedTokens: number(details["cached_tokens"]) };
  }
  if (typeof usage["input_tokens"] !== "number") return undefined;
  if ("cache_read_input_tokens" in usage) {
    // Anthropic: input_tokens are the uncached part
    const cached = number(usage["cache_read_input_tokens"]);
    return { promptTokens: usage["input_tokens"] + cached, cachedTokens: cached };
  }
  const details = isObject(usage["input_tokens_details"]) ? usage["input_tokens_details"] : {};
  return { promptTokens: usage["input_tokens"], cachedTokens: number(details["cached_tokens"]) };
}

/** The first usage with a prompt count in an answer (a JSON body, or the data lines of an event stream). */
function answerUsage(text: string): RecordedRequest["usage"] {
  const documents = text.trimStart().startsWith("{")
    ? [text]
    : text.split("\n").flatMap((line) => (line.startsWith("data: {") ? [line.slice(6)] : []));
  for (const document of documents) {
    let value: unknown;
    try {
      value = JSON.parse(document);
    } catch {
      continue;
    }
    if (!isObject(value)) continue;
    for (const holder of [value, value["message"], value["response"]]) {
      if (isObject(holder) && isObject(holder["usage"])) {
        const usage = usageOf(holder["usage"]);
        if (usage !== undefined && usage.promptTokens > 0) return usage;
      }
    }
  }
  return undefined;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

function parsed(raw: Buffer): unknown {
  const text = raw.toString("utf8");
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const [upstreamArg, outPath] = process.argv.slice(2);
if (upstreamArg === undefined || outPath === undefined) {
  process.stderr.write("usage: recording-proxy.ts UPSTREAM_URL OUT.jsonl\n");
  process.exit(2);
}
const upstream = new URL(upstreamArg);

const server = createServer((req, res) => {
  void readBody(req).then((raw) => {
    const record = (status: number, answer: string): RecordedRequest => ({
      method: req.method ?? "GET",
      path: req.url ?? "/",
      headers: req.headers,
      body: parsed(raw),
      status,
      usage: answerUsage(answer),
    });
    const forward = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: req.method,
        path: req.url,
        headers: { ...req.headers, host: upstream.host },
      },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        const chunks: Buffer[] = [];
        answer.on("data", (chunk: Buffer) => {
          chunks.push(chunk);
          res.write(chunk);
        });
        answer.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          appendFileSync(outPath, `${JSON.stringify(record(answer.statusCode ?? 502, text))}\n`);
          res.end();
        });
      },
    );
    forward.on("error", (err) => {
      if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
      res.end(err.message);
    });
    forward.end(raw);
  });
});
server.listen(0, "127.0.0.1", () => {
  const address = server.address();
  if (address !== null && typeof address === "object")
    process.stdout.write(`recording on http://127.0.0.1:${address.port}\n`);
});
