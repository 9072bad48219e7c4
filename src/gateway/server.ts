// The gateway's HTTP surface: routes, the request lifecycle (abort, deadline, errors, log line, metrics).
import { randomUUID } from "node:crypto";
import {
  STATUS_CODES,
  createServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { GatewayError, toGatewayError, type ErrorCode } from "../core/errors.js";
import { handleAdmin, type AdminActions, type AdminDeps } from "./admin-handler.js";
import { handleCompletion, type CompletionDeps } from "./completion-handler.js";
import { requireApiKey } from "./client-auth.js";
import {
  handleStoredResponse,
  isStoredResponsePath,
  type StoredResponseDeps,
} from "./stored-response-handler.js";
import { cancelRequest, newRequestContext, type RequestContext } from "./request-context.js";
import type { GatewayParts, LiveState } from "./runtime.js";
import { writeJson } from "../core/write-json.js";
import { answerError } from "./responder.js";
import { logInfoLine } from "../core/json-log-line.js";

import { ClientClosedError } from "./client-closed.js";

export { ClientClosedError };

/** A route's handler; `live` is the snapshot the request read at its start (it keeps it to its end). */
type Handler = (
  req: IncomingMessage,
  res: ServerResponse,
  ctx: RequestContext,
  live: LiveState,
) => Promise<void>;

/** What the server and its handlers use of the gateway. */
export type ServerDeps = CompletionDeps &
  AdminDeps &
  StoredResponseDeps &
  Pick<GatewayParts, "clock" | "timers" | "logger" | "tracer" | "metrics" | "registry" | "live">;

/** Non-standard but widely understood: the client closed the connection before the response was complete. */
const CLIENT_CLOSED_STATUS = 499;

export interface ServerHooks extends AdminActions {
  /** False while shutting down: new requests get 503. */
  accepting(): boolean;
  /** Requests in progress (the gateway ends them at the end of a shutdown's grace). */
  readonly live: Set<RequestContext>;
  /**
   * Told when each request begins and when its response closes (the API server's: in-flight count, idle
   * connections), by the request's own handler and close listener rather than listeners of their own.
   */
  readonly requests?: RequestWatcher | undefined;
}

export interface RequestWatcher {
  started(socket: Socket): void;
  ended(socket: Socket): void;
}

/**
 * Methods the gateway knows: on a route that does not take one of them, 405. Any other method (PROPFIND,
 * TRACE, ...) is one it does not implement: 501, as RFC 9110 asks.
 */
const KNOWN_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]);
/**
 * A request left unread when its answer is sent (too large, refused early) is read on and discarded, up to
 * this much or this long, before the connection is cut: closing with unread bytes makes the kernel reset
 * the connection, and the client may then lose the answer it had not read yet (the 413 it needs).
 */
const DRAIN_LIMIT_BYTES = 16 * 1024 * 1024;
const DRAIN_LIMIT_MS = 5000;
/**
 * Past the drain bound the connection is half-closed (FIN after the answer) and read on, discarding, this long
 * at most before it is cut: a client still writing its body reads the answer and the FIN, and stops. Cutting
 * at once with its bytes unread resets the connection, and the reset throws away the answer it had not read.
 */
const LINGER_MS = 5000;

/** What stays answered while a shutdown drains: liveness, readiness (which says so) and metrics. */
const DURING_SHUTDOWN = new Set(["GET /healthz", "GET /readyz", "GET /metrics"]);

/** What one listening server answers: the API (with /healthz, /readyz, /metrics), /admin, or both. */
export interface ServerSurface {
  api: boolean;
  admin: boolean;
}

export function createGatewayServer(
  rt: ServerDeps,
  hooks: ServerHooks,
  surface: ServerSurface = { api: true, admin: true },
): Server {
  const routes = new Map<string, Handler>([
    ["POST /v1/chat/completions", (req, res, ctx, live) => handleCompletion(rt, live, "chat", req, res, ctx)],
    [
      "POST /v1/completions",
      (req, res, ctx, live) => handleCompletion(rt, live, "completions", req, res, ctx),
    ],
    ["POST /v1/responses", (req, res, ctx, live) => handleCompletion(rt, live, "responses", req, res, ctx)],
    ["POST /v1/messages", (req, res, ctx, live) => handleCompletion(rt, live, "messages", req, res, ctx)],
    [
      "POST /v1/messages/count_tokens",
      (req, res, ctx, live) => handleCompletion(rt, live, "messages", req, res, ctx, true),
    ],
    ["GET /v1/models", async (_req, res) => writeJson(res, 200, listModels(rt))],
    ["GET /healthz", async (_req, res) => writeJson(res, 200, { status: "ok" })],
    ["GET /readyz", async (_req, res) => readiness(rt, res, hooks.accepting())],
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

  const startSettings = rt.live.current.settings;
  const timeouts = startSettings.clientTimeouts;
  const server = createServer(
    {
      keepAlive: true,
      noDelay: true,
      maxHeaderSize: 16 * 1024,
      requestTimeout: timeouts.receiveMs,
      headersTimeout: timeouts.headersMs,
      // Node checks those timeouts only this often (30 s by default, which made them 30-50 s and 60-90 s):
      // every second, or four times per headers timeout when that is shorter (at most every 50 ms).
      connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.round(timeouts.headersMs / 4))),
    },
    (req, res) => void serve(req, res),
  );
  server.keepAliveTimeout = 65_000;
  // What a connection was told by answerClientError: a request still being read on it (its body timed
  // out) is recorded with that answer, not as a client that left.
  const answeredRaw = new WeakMap<Duplex, GatewayError>();
  // Connections answered and half-closed, read on only to be discarded (lingerThenClose).
  const lingering = new WeakSet<Duplex>();
  server.on("clientError", (err: NodeJS.ErrnoException, socket: Duplex) => {
    // node's parser reports its error again for every further chunk of a connection it refused.
    if (lingering.has(socket)) return;
    const error = answerClientError(err, socket, rt, lingering);
    if (error !== undefined) answeredRaw.set(socket, error);
  });
  // Without a listener node drops a CONNECT's connection without a word.
  server.on("connect", (_req: IncomingMessage, socket: Duplex) =>
    answerRaw(
      socket,
      new GatewayError("not_implemented", "CONNECT is not supported: this is not a proxy"),
      rt,
    ),
  );
  // undefined when server.tracing is off: then each hook below is a no-op.
  const tracer = rt.tracer;
  const watcher = hooks.requests;
  server.on("close", () => void tracer?.shutdown());

  async function serve(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // A request that follows a refused body on a connection being closed is never served.
    if (lingering.has(req.socket)) return void req.socket.destroy();
    const url = req.url ?? "/";
    const query = url.indexOf("?");
    const path = query < 0 ? url : url.slice(0, query);
    const method = req.method ?? "GET";
    const live = rt.live.current;
    const ctx = newRequestContext(
      validRequestId(req.headers["x-request-id"]) ?? randomUUID(),
      rt.clock.nowMs(),
      method,
      path,
    );
    const socket = req.socket;
    watcher?.started(socket);
    tracer?.begin(ctx, req.headers);
    hooks.live.add(ctx);
    const cancelDeadline = rt.timers.after(live.settings.requestTimeoutMs, () =>
      cancelRequest(ctx, new GatewayError("upstream_timeout", "request deadline passed")),
    );
    // The request's record (log line, metrics, trace) is written once both its response is done and its
    // handler has ended: the handler records its turn's facts when it ends, after a client that left too.
    let handled = false;
    let closed = false;
    let answered: GatewayError | undefined;
    res.on("close", () => {
      cancelDeadline();
      hooks.live.delete(ctx);
      if (!res.writableFinished) {
        ctx.clientClosed = true;
        cancelRequest(ctx, new ClientClosedError("client closed the connection"));
      }
      // Only a request still being received was cut by that answer.
      answered = req.complete ? undefined : answeredRaw.get(socket);
      answeredRaw.delete(socket);
      closed = true;
      if (handled) finish(ctx, res, answered);
      watcher?.ended(socket);
    });
    try {
      checkFraming(req, method);
      // Authentication first: a /v1 request without a valid key learns nothing else (RFC 9110's 401).
      if (path === "/v1" || path.startsWith("/v1/"))
        ctx.apiKey = requireApiKey(req.headersDistinct, live.settings.apiKeys);
      if (!hooks.accepting() && !DURING_SHUTDOWN.has(`${method} ${path}`))
        throw new GatewayError("shutting_down", "the gateway is shutting down", { retryAfterSeconds: 1 });
      // With server.admin_port, each port answers its own part (and /healthz, for the probes of either).
      const admin = path === "/admin" || path.startsWith("/admin/");
      if (admin ? !surface.admin : !surface.api && path !== "/healthz")
        throw new GatewayError("not_found", `no route ${method} ${path} on this port`);
      const handler = routes.get(`${method} ${path}`);
      if (handler !== undefined) await handler(req, res, ctx, live);
      else if (admin) await handleAdmin(rt, live, hooks, req, res, path);
      else if (isStoredResponsePath(path)) await handleStoredResponse(rt, live, req, res, ctx);
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
      const closing = !req.complete;
      if (closing) {
        // The connection ends after this answer (the responder tells the client so), and node's own close of
        // it (destroySoon, a reset while the client still writes) becomes a lingering close.
        const socket = req.socket;
        socket.destroySoon = () => lingerThenClose(socket, lingering);
      }
      answerError(res, ctx, error, closing);
      // A body left unread (too large, or refused before reading) is read on and discarded, a bounded
      // amount, so that the client reads this answer before the connection is cut.
      if (!req.complete) drainThenClose(req, lingering);
    } finally {
      cancelDeadline();
      handled = true;
      if (closed) finish(ctx, res, answered);
    }
  }

  function finish(ctx: RequestContext, res: ServerResponse, answered: GatewayError | undefined): void {
    if (ctx.clientClosed && answered !== undefined) ctx.errorCode = answered.code;
    const status = ctx.clientClosed ? (answered?.status ?? CLIENT_CLOSED_STATUS) : res.statusCode;
    // A stream that ended in an error event was sent as a 200, yet failed: the metric counts the error's status.
    const outcome = ctx.streamError === undefined ? status : streamErrorStatus(ctx.streamErrorCode);
    const durationMs = rt.clock.nowMs() - ctx.startedAtMs;
    if (ctx.path.startsWith("/v1/") && ctx.method === "POST") {
      rt.metrics.requestDone(ctx.tier ?? "none", ctx.backend ?? "none", outcome, durationMs / 1000);
    }
    tracer?.end(ctx, status);
    logInfoLine(
      rt.logger,
      {
        reqId: ctx.requestId,
        method: ctx.method,
        path: ctx.path,
        status,
        ms: Math.round(durationMs * 10) / 10,
        session: ctx.sessionId,
        sessionSource: ctx.sessionSource,
        agent: ctx.agentId,
        tier: ctx.tier,
        backend: ctx.backend,
        reason: ctx.reason,
        hit: ctx.affinityHit,
        attempts: ctx.attempts || undefined,
        queueMs: ctx.queueWaitMs > 0 ? Math.round(ctx.queueWaitMs) : undefined,
        band: ctx.band,
        error: ctx.errorCode ?? ctx.streamError,
        errorCode: ctx.streamError === undefined ? undefined : ctx.streamErrorCode,
        cause: ctx.streamErrorCause,
        migrated: ctx.migrated,
        adapted: ctx.adapted,
        reusable: ctx.receipt?.reusableTokens,
        cached: ctx.receipt?.cachedTokens,
        lost: ctx.receipt?.lostTokens,
        lostCause: ctx.receipt?.lostCause,
        prompt: ctx.prompt,
      },
      "request",
    );
  }

  return server;
}

/** The status a stream's error would have had before its first byte (upstream_timeout 504, else 502). */
function streamErrorStatus(code: string | undefined): number {
  return code === "upstream_timeout" ? 504 : code === "shutting_down" ? 503 : 502;
}

/** Codes of requests refused before any engine saw them (agentserve_rejections_total{reason}). */
const REFUSALS = new Set<ErrorCode>([
  "budget_exceeded",
  "too_many_agents",
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
function answerClientError(
  err: NodeJS.ErrnoException,
  socket: Duplex,
  rt: Pick<GatewayParts, "metrics">,
  lingering: WeakSet<Duplex>,
): GatewayError | undefined {
  // A response of this connection already under way would get a status line in its middle (node's own
  // handler makes the same check): then the connection is only closed.
  const answering = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (err.code === "ECONNRESET" || !socket.writable || answering?.headersSent === true) {
    socket.destroy();
    return undefined;
  }
  const error =
    err.code === "HPE_HEADER_OVERFLOW"
      ? new GatewayError("header_too_large", "request headers are too large")
      : err.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? new GatewayError("request_timeout", "the request was not received in time")
        : new GatewayError("invalid_request", "malformed HTTP request");
  // A refused header or a malformed request leaves node's parser in its error state: what the client still
  // sends is never served, so the connection lingers (the client reads its answer). A request that timed
  // out is cut at once: its late body would otherwise reach the handler waiting for it.
  answerRaw(socket, error, rt, error.code === "request_timeout" ? undefined : lingering);
  return error;
}

/**
 * An answer written straight to a socket that no HTTP response object owns, then the connection closed once
 * it has left: closed, not half-closed, or node's parser would read on and serve what the client sends after
 * it (the rest of a body that timed out, a next request).
 */
function answerRaw(
  socket: Duplex,
  error: GatewayError,
  rt: Pick<GatewayParts, "metrics">,
  lingering?: WeakSet<Duplex>,
): void {
  rt.metrics.rejection(error.code);
  const body = JSON.stringify(error.toJSON());
  const answer =
    `HTTP/1.1 ${error.status} ${STATUS_CODES[error.status] ?? "Error"}\r\ncontent-type: application/json\r\n` +
    `content-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
  if (lingering === undefined) socket.end(answer, () => socket.destroy());
  else {
    socket.write(answer);
    lingerThenClose(socket, lingering);
  }
}

/**
 * RFC 9112: a transfer coding the server does not understand gets 501 (node would decode "gzip, chunked" as
 * chunked and pass the gzip bytes on as if they were JSON); a method it does not implement gets 501 too.
 */
function checkFraming(req: IncomingMessage, method: string): void {
  if (!KNOWN_METHODS.has(method)) {
    throw new GatewayError("not_implemented", `method ${method} is not implemented by this gateway`);
  }
  const coding = req.headers["transfer-encoding"];
  if (coding !== undefined && coding.trim() === "") {
    throw new GatewayError("invalid_header", "an empty Transfer-Encoding header", {
      param: "transfer-encoding",
    });
  }
  if (coding !== undefined && coding.trim().toLowerCase() !== "chunked") {
    throw new GatewayError("not_implemented", `transfer coding '${coding}' is not supported (only chunked)`, {
      param: "transfer-encoding",
    });
  }
}

/**
 * Reads and drops what the client still sends of a refused body, a bounded amount: a body that ends within
 * it leaves the connection usable; past the bound (or the time) the connection lingers, then closes.
 */
function drainThenClose(req: IncomingMessage, lingering: WeakSet<Duplex>): void {
  let drained = 0;
  const stop = (): void => {
    clearTimeout(timer);
    req.off("data", onData);
  };
  const cut = (): void => {
    stop();
    lingerThenClose(req.socket, lingering);
  };
  const onData = (chunk: Buffer): void => {
    drained += chunk.length;
    if (drained > DRAIN_LIMIT_BYTES) cut();
  };
  // The system's timer, not the gateway's: socket hygiene, which must end whatever a test's manual clock does.
  const timer = setTimeout(cut, DRAIN_LIMIT_MS);
  timer.unref();
  req.on("data", onData);
  req.once("end", stop);
  req.socket.once("close", () => clearTimeout(timer));
  req.resume();
}

/**
 * A lingering close: the answer already written, sends FIN after it and reads on (node's parser, or this
 * function, discards the bytes) until the client closes or LINGER_MS pass, then cuts the connection.
 */
function lingerThenClose(socket: Duplex, lingering: WeakSet<Duplex>): void {
  if (lingering.has(socket) || socket.destroyed) return;
  lingering.add(socket);
  socket.end();
  // The system's timer, as drainThenClose's: a connection closes whatever a test's manual clock does.
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once("close", () => clearTimeout(timer));
  // A client that leaves resets the connection; node's own error listener may be gone (a refused header).
  socket.on("error", () => socket.destroy());
  // The client's FIN ends it early; a socket without a reader would stop reading (and not see that FIN).
  socket.on("end", () => socket.destroy());
  socket.resume();
}

function validRequestId(value: string | string[] | undefined): string | undefined {
  return typeof value === "string" && /^[\x21-\x7e]{1,128}$/.test(value) ? value : undefined;
}

function listModels(rt: Pick<GatewayParts, "clock" | "registry">): unknown {
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

/** Not ready from the moment a shutdown starts, so load balancers stop sending before connections close. */
function readiness(rt: Pick<GatewayParts, "registry">, res: ServerResponse, accepting: boolean): void {
  const backends = [...rt.registry.all()].map((b) => ({ id: b.id, tier: b.tier, state: b.state }));
  const ready = accepting && rt.registry.anyAvailable();
  const status = !accepting ? "shutting down" : ready ? "ready" : "no healthy backend";
  writeJson(res, ready ? 200 : 503, { status, backends }, ready ? {} : { "retry-after": "1" });
}
