// Test fixture: scripted faulty engines (small node:http servers) and a gateway in front of any engine URLs.
import { EventEmitter } from "node:events";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { pino } from "pino";
import { parseConfig } from "../../src/config/load.js";
import type { GatewayConfig } from "../../src/config/schema.js";
import { Gateway, type GatewayOptions } from "../../src/gateway/gateway.js";

export interface CompletionCall {
  req: IncomingMessage;
  res: ServerResponse;
  body: Buffer;
  /** 1 for the first request on its connection, 2 for the second, ... */
  requestOnConnection: number;
  socket: Socket;
}

export interface ScriptedEngineOptions {
  /** Answers /v1/chat/completions and /v1/completions. */
  completion: (call: CompletionCall) => void;
  /** Answers GET /health (200 `{}` by default); it may hold the answer back (a hung engine). */
  health?: (res: ServerResponse) => void;
  /** The cumulative token count its /metrics reports (prompt and generation counters); 0 by default. */
  tokens?: () => number;
  /** Closes idle kept-alive connections after this many ms (node's keepAliveTimeout); 5 s by default. */
  keepAliveTimeoutMs?: number;
}

export interface ScriptedEngine {
  url: string;
  /** Completion requests received. */
  readonly completions: number;
  /** TCP connections accepted. */
  readonly connections: number;
  /** GET /health requests answered. */
  readonly probes: number;
  /** Resolves when some connection to it closes (whoever closed it). */
  nextClose(): Promise<void>;
  /** Resolves once `count` probes, completion requests or /metrics reads have arrived (from now on). */
  after(event: EngineEvent, count?: number): Promise<void>;
  close(): Promise<void>;
}

export type EngineEvent = "probe" | "completion" | "metrics";

export async function startScriptedEngine(options: ScriptedEngineOptions): Promise<ScriptedEngine> {
  let completions = 0;
  let connections = 0;
  let probes = 0;
  const perSocket = new WeakMap<Socket, number>();
  const sockets = new Set<Socket>();
  const closeWaiters: (() => void)[] = [];
  const events = new EventEmitter();
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    if (req.method === "GET" && path === "/health") {
      probes++;
      if (options.health !== undefined) options.health(res);
      else res.writeHead(200, { "content-type": "application/json" }).end("{}");
      events.emit("probe");
      return;
    }
    if (req.method === "GET" && path === "/metrics") {
      const tokens = options.tokens?.() ?? 0;
      res.writeHead(200, { "content-type": "text/plain; version=0.0.4" });
      res.end(
        `vllm:num_requests_running 1\nvllm:prompt_tokens_total ${tokens}\nvllm:generation_tokens_total 0\n`,
      );
      events.emit("metrics");
      return;
    }
    const socket = req.socket;
    const n = (perSocket.get(socket) ?? 0) + 1;
    perSocket.set(socket, n);
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      completions++;
      options.completion({ req, res, body: Buffer.concat(chunks), requestOnConnection: n, socket });
      events.emit("completion");
    });
  });
  server.keepAliveTimeout = options.keepAliveTimeoutMs ?? 5000;
  server.on("connection", (socket: Socket) => {
    connections++;
    sockets.add(socket);
    socket.once("close", () => {
      sockets.delete(socket);
      for (const resolve of closeWaiters.splice(0)) resolve();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    get completions() {
      return completions;
    },
    get connections() {
      return connections;
    },
    get probes() {
      return probes;
    },
    nextClose: () => new Promise<void>((resolve) => closeWaiters.push(resolve)),
    after: (event, count = 1) =>
      new Promise<void>((resolve) => {
        let left = count;
        const seen = (): void => {
          if (--left > 0) return;
          events.off(event, seen);
          resolve();
        };
        events.on(event, seen);
      }),
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A small OpenAI chat completion body (what a healthy engine answers). */
export function chatAnswer(content = "ok", usage = { prompt_tokens: 5, completion_tokens: 2 }): string {
  return JSON.stringify({
    id: "chatcmpl-test",
    object: "chat.completion",
    created: 0,
    model: "m",
    choices: [{ index: 0, message: { role: "assistant", content }, finish_reason: "stop" }],
    usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
  });
}

export function answerOk(res: ServerResponse, body = chatAnswer()): void {
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
  res.end(body);
}

export interface EngineRef {
  id: string;
  tier?: string;
  url: string;
  model?: string;
  maxInflight?: number;
}

export interface TestGateway {
  gateway: Gateway;
  url: string;
  config: GatewayConfig;
  close(): Promise<void>;
}

/** A gateway (in process, loopback, OS-assigned port) in front of the given engine URLs. */
export async function startGatewayFor(
  engines: EngineRef[],
  overrides: Record<string, unknown> = {},
  options: GatewayOptions = {},
): Promise<TestGateway> {
  const config = parseConfig(
    {
      ...overrides,
      server: { host: "127.0.0.1", port: 0, ...(overrides["server"] as object | undefined) },
      backends: engines.map((e) => ({
        id: e.id,
        tier: e.tier ?? "small",
        base_url: e.url,
        model: e.model ?? "m",
        ...(e.maxInflight === undefined ? {} : { max_inflight: e.maxInflight }),
      })),
    },
    "test",
  );
  const gateway = await Gateway.start(config, {
    logger: pino({ level: process.env["TEST_LOG_LEVEL"] ?? "silent" }),
    listen: { host: "127.0.0.1", port: 0 },
    ...options,
  });
  return { gateway, url: gateway.url, config, close: () => gateway.close(0) };
}

/** POSTs a chat completion; returns status, headers and text. */
export async function post(
  url: string,
  body: Record<string, unknown> = { model: "m", messages: [{ role: "user", content: "hi" }] },
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; text: string }> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, text: await response.text() };
}
