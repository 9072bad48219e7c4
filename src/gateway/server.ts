// The gateway's HTTP surface: routes, the request lifecycle (abort, deadline, errors, log line, metrics).
import { randomUUID } from "node:crypto";
import {
  STATUS_CODES,
  createServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { Duplex } from "node:stream";
import { GatewayError, toGatewayError, type ErrorCode } from "../core/errors.js";
import { createRequestTracer } from "../tracing/request-tracer.js";
import { handleAdmin, type AdminActions } from "./admin-handler.js";
import { handleCompletion } from "./completion-handler.js";
import { handleStoredResponse, isStoredResponsePath } from "./stored-response-handler.js";
import { cancelRequest, type RequestContext } from "./request-context.js";
import type { GatewayRuntime } from "./runtime.js";
import { writeJson } from "../core/write-json.js";

/** The cancel reason of a request whose client disconnected. */
export class ClientClosedError extends GatewayError {
  override name = "ClientClosedError";
  constructor(message: string) {
    super("client_closed", message);
  }
}

type Handler = (req: IncomingMessage, res: ServerResponse, ctx: RequestContext) => Promise<void>;

/** Non-standard but widely understood: the client closed the connection before the response was complete. */
const CLIENT_CLOSED_STATUS = 499;

export interface ServerHooks extends AdminActions {
  /** False while shutting down: new requests get 503. */
  accepting(): boolean;
}

export function createGatewayServer(rt: GatewayRuntime, hooks: ServerHooks): Server {
  const routes = new Map<string, Handler>([
    ["POST /v1/chat/completions", (req, res, ctx) => handleCompletion(rt, "chat", req, res, ctx)],
    ["POST /v1/completions", (req, res, ctx) => handleCompletion(rt, "completions", req, res, ctx)],
    ["POST /v1/responses", (req, res, ctx) => handleCompletion(rt, "responses", req, res, ctx)],
    ["GET /v1/models", async (_req, res) => writeJson(res, 200, listModels(rt))],
    ["GET /healthz", async (_req, res) => writeJson(res, 200, { status: "ok" })],
    ["GET /readyz", async (_req, res) => readiness(rt, res)],
    [
      "GET /metrics",
      async (_req, res) => {
        const text = await rt.metrics.render();
        res.writeHead(200, { "content-type": rt.metrics.contentType });
        res.end(text);
      },
    ],
  ]);
  const knownPaths = new Set([...routes.keys()].map((key) => key.slice(key.indexOf(" ") + 1)));

  const server = createServer(
    {
      keepAlive: true,
      noDelay: true,
      maxHeaderSize: 16 * 1024,
      requestTimeout: 60_000,
      headersTimeout: 20_000,
    },
    (req, res) => void serve(req, res),
  );
  server.keepAliveTimeout = 65_000;
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) =>
    answerClientError(err, socket, rt),
  );
  // undefined when server.tracing is off: then each hook below is a no-op.
  const tracer = createRequestTracer(rt.settings.config.server.tracing, rt.logger);
  server.on("close", () => void tracer?.shutdown());

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? "/";
    const query = url.indexOf("?");
    const path = query < 0 ? url : url.slice(0, query);
    const method = req.method ?? "GET";
    const ctx: RequestContext = {
      requestId: validRequestId(req.headers["x-request-id"]) ?? randomUUID(),
      startedAtMs: rt.clock.nowMs(),
      method,
      path,
      attempts: 0,
      queueWaitMs: 0,
    };
    tracer?.begin(ctx, req.headers);
    const deadline = setTimeout(
      () => cancelRequest(ctx, new GatewayError("upstream_timeout", "request deadline passed")),
      rt.settings.requestTimeoutMs,
    );
    res.on("close", () => {
      clearTimeout(deadline);
      if (!res.writableFinished) {
        ctx.clientClosed = true;
        cancelRequest(ctx, new ClientClosedError("client closed the connection"));
      }
      finish(ctx, res);
    });
    try {
      if (!hooks.accepting())
        throw new GatewayError("shutting_down", "the gateway is shutting down", { retryAfterSeconds: 1 });
      const handler = routes.get(`${method} ${path}`);
      if (handler !== undefined) await handler(req, res, ctx);
      else if (isStoredResponsePath(path)) await handleStoredResponse(rt, req, res, ctx);
      else if (path === "/admin" || path.startsWith("/admin/")) await handleAdmin(rt, hooks, req, res, path);
      else if (knownPaths.has(path))
        throw new GatewayError("method_not_allowed", `${method} is not allowed on ${path}`);
      else throw new GatewayError("not_found", `no route ${method} ${path}`);
    } catch (err) {
      if (ctx.clientClosed) return;
      const reason = ctx.cancelReason ?? err;
      const error = toGatewayError(reason instanceof GatewayError ? reason : err);
      if (error.code === "internal_error")
        rt.logger.error({ reqId: ctx.requestId, err: error.cause }, "internal error");
      ctx.errorCode = error.code;
      if (REFUSALS.has(error.code)) rt.metrics.rejection(error.code);
      if (res.headersSent) {
        res.destroy();
        return;
      }
      const headers: Record<string, string> = { ...error.headers(), "x-request-id": ctx.requestId };
      if (ctx.tier !== undefined) headers["x-agent-serve-tier"] = ctx.tier;
      // A body left unread (too large, or refused before reading) is discarded by node; the connection is
      // not reused, so a client still sending cannot make us read an unbounded body.
      if (!req.complete) headers["connection"] = "close";
      writeJson(res, error.status, error.toJSON(), headers);
    } finally {
      clearTimeout(deadline);
    }
  }

  function finish(ctx: RequestContext, res: ServerResponse): void {
    const status = ctx.clientClosed ? CLIENT_CLOSED_STATUS : res.statusCode;
    const durationMs = rt.clock.nowMs() - ctx.startedAtMs;
    if (ctx.path.startsWith("/v1/") && ctx.method === "POST") {
      rt.metrics.requestDone(ctx.tier ?? "none", ctx.backend ?? "none", status, durationMs / 1000);
    }
    tracer?.end(ctx, status);
    rt.logger.info(
      {
        reqId: ctx.requestId,
        method: ctx.method,
        path: ctx.path,
        status,
        ms: Math.round(durationMs * 10) / 10,
        session: ctx.sessionId,
        agent: ctx.agentId,
        tier: ctx.tier,
        backend: ctx.backend,
        reason: ctx.reason,
        hit: ctx.affinityHit,
        attempts: ctx.attempts || undefined,
        queueMs: ctx.queueWaitMs > 0 ? Math.round(ctx.queueWaitMs) : undefined,
        error: ctx.errorCode ?? ctx.streamError,
        prompt: ctx.prompt,
      },
      "request",
    );
  }

  return server;
}

/** Codes of requests refused before any engine saw them (agentserve_rejections_total{reason}). */
const REFUSALS = new Set<ErrorCode>([
  "budget_exceeded",
  "queue_full",
  "queue_timeout",
  "no_healthy_backend",
  "shutting_down",
  "unauthorized",
  "body_too_large",
  "invalid_json",
  "invalid_request",
  "invalid_header",
  "model_not_found",
  "tier_not_found",
]);

/**
 * Requests node's HTTP parser refuses before any handler runs (oversized or malformed headers, slow
 * clients) still get an honest status and the OpenAI envelope rather than node's bare answer.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex, rt: GatewayRuntime): void {
  if (err.code === "ECONNRESET" || !socket.writable) {
    socket.destroy();
    return;
  }
  const error =
    err.code === "HPE_HEADER_OVERFLOW"
      ? new GatewayError("header_too_large", "request headers are too large")
      : err.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? new GatewayError("request_timeout", "the request was not received in time")
        : new GatewayError("invalid_request", `malformed HTTP request (${err.code ?? "parse error"})`);
  rt.metrics.rejection(error.code);
  const body = JSON.stringify(error.toJSON());
  socket.end(
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? "Error"}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}

function validRequestId(value: string | string[] | undefined): string | undefined {
  return typeof value === "string" && /^[\x21-\x7e]{1,128}$/.test(value) ? value : undefined;
}

function listModels(rt: GatewayRuntime): unknown {
  const created = Math.floor(rt.clock.nowMs() / 1000);
  return {
    object: "list",
    data: rt.registry.models().map((id) => ({
      id,
      object: "model",
      created,
      owned_by: "agent-serve",
      tier: rt.registry.tierOfModel(id),
    })),
  };
}

function readiness(rt: GatewayRuntime, res: ServerResponse): void {
  const backends = [...rt.registry.all()].map((b) => ({ id: b.id, tier: b.tier, state: b.state }));
  const ready = rt.registry.anyAvailable();
  writeJson(res, ready ? 200 : 503, { status: ready ? "ready" : "no healthy backend", backends });
}
