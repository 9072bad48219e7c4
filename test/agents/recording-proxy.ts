// A recording proxy for captures: every request (method, path, headers, body) is appended to a JSONL file, then
// passed on to the upstream (the gateway) and its answer streamed back. Run inside the loopback-only namespace:
// `node --import tsx test/agents/recording-proxy.ts UPSTREAM_URL OUT.jsonl` prints "recording on URL".
import { appendFileSync } from "node:fs";
import { createServer, request as httpRequest, type IncomingMessage } from "node:http";

/** One recorded request: the body parsed when it is JSON, else kept as text. */
export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingMessage["headers"];
  body: unknown;
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
    const record: RecordedRequest = {
      method: req.method ?? "GET",
      path: req.url ?? "/",
      headers: req.headers,
      body: parsed(raw),
    };
    appendFileSync(outPath, `${JSON.stringify(record)}\n`);
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
        answer.pipe(res);
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
