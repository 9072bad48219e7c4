// Scripted faulty engines for the fault benchmarks: node:http servers on OS-assigned loopback ports.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface BenchEngine {
  url: string;
  close(): Promise<void>;
}

/** /health and /metrics answer like a healthy vLLM (counters still); completions go to `completion`. */
export async function startEngine(
  completion: (req: IncomingMessage, res: ServerResponse, body: Buffer) => void,
): Promise<BenchEngine> {
  const server = createServer((req, res) => {
    if (req.url === "/health") return void res.writeHead(200).end("{}");
    if (req.url === "/metrics")
      return void res.writeHead(200).end("vllm:prompt_tokens_total 0\nvllm:generation_tokens_total 0\n");
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => completion(req, res, Buffer.concat(chunks)));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function okAnswer(res: ServerResponse, promptTokens: number, completionTokens: number): void {
  const body = JSON.stringify({
    id: "x",
    object: "chat.completion",
    choices: [{ index: 0, message: { role: "assistant", content: "x" }, finish_reason: "stop" }],
    usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens },
  });
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}
