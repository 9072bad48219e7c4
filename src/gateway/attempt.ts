// One attempt of a completion on one engine, on undici's dispatch API: no response stream objects, chunks
// go from the engine's socket to the client's as they arrive (buffered only for non-streaming answers).
import type { Dispatcher } from "undici";
import type { Timers } from "../core/clock.js";
import { GatewayError } from "../core/errors.js";
import type { Backend } from "../backends/backend.js";
import { stopReasonError, type AttemptAbort } from "./attempt-abort.js";
import { engineErrorBody } from "./engine-error.js";
import { metadataMember, spliceMemberIntoJson, type AgentServeMetadata } from "./response-metadata.js";
import { answerHead, answerJson, openEventStream } from "./responder.js";
import type { StreamBreak, StreamReceipt, StreamRelay } from "./stream-relay.js";
import { extractUsage, type TokenUsage } from "./usage.js";
import {
  AttemptFailure,
  classifyUpstreamError,
  isStaleConnectionError,
  retryAfterOf,
  type AbandonReason,
} from "./upstream-failure.js";
import type { FreshConnection } from "./upstream-pools.js";
import { ClientClosedError } from "./client-closed.js";

/**
 * Where an attempt writes its answer: the client's response (a ServerResponse is one), or the buffer of a
 * request the gateway makes itself (the tier classifier's).
 */
export interface AnswerSink {
  writeHead(status: number, headers: string[]): unknown;
  write(chunk: Buffer): boolean;
  end(chunk?: Buffer): unknown;
  cork(): void;
  uncork(): void;
  readonly destroyed: boolean;
  readonly writableEnded: boolean;
  once(event: "drain", listener: () => void): unknown;
  off(event: "drain", listener: () => void): unknown;
}

/** What an attempt needs from the gateway besides its plan (built once per gateway, not per request). */
export interface AttemptEnv {
  readonly nowMs: () => number;
  /** Where the first-byte, headers and stall timers run: the gateway's (a manual clock's in tests). */
  readonly timers: Timers;
  readonly firstByteTimeoutMs: number;
  /** The first-byte timeout of streams (their first chunk follows the engine's prefill only). */
  readonly streamFirstByteTimeoutMs: number;
  /** A stream's response headers: an engine sends them before prefill, so a short wait for them is safe. */
  readonly streamHeadersTimeoutMs: number;
  /** A non-streaming answer is abandoned past this many bytes. */
  readonly maxResponseBytes: number;
  /** A connection of its own to the backend (the retry after a reused one was found closed). */
  readonly freshConnection: (backend: Backend) => FreshConnection;
  readonly logger: {
    warn(fields: object, message: string): void;
    debug(fields: object, message: string): void;
  };
  /** Registers the attempt so that a backend going down abandons it; returns the undo. */
  readonly track: (backendId: string, abort: AttemptAbort) => () => void;
  /** A stream's time to first token, in seconds. */
  readonly firstToken: (tier: string, seconds: number) => void;
  /** A stream whose engine sends nothing for this long after its first byte is broken (0: never). */
  readonly streamStallTimeoutMs: number;
}

/**
 * [continuation] How an attempt takes part in a stream continued on another engine (src/gateway/continuation):
 * the attempt path's only knowledge of it.
 */
export interface AttemptContinuation {
  /** The client's stream is open already: no headers are written, and createRelay splices the engine's stream. */
  readonly resume: boolean;
  /** Whether a stream its engine breaks now is left open (no error event) for the next engine to continue. */
  keepOpenOnBreak(): boolean;
}

export interface AttemptPlan {
  backend: Backend;
  /** The backend's pooled connections and base path. */
  upstream: { pool: Dispatcher; basePath: string };
  /** POST for completions; a stored response's read, delete or cancel uses GET, DELETE or POST. */
  method: "POST" | "GET" | "DELETE";
  path: string;
  /** undefined: no body (a stored response's routes). */
  body: Buffer | undefined;
  stream: boolean;
  /**
   * The engine's answer goes to the client as it is, with only x-request-id and x-agent-serve-backend (a
   * stored response's routes: nothing was placed, so there is no metadata to splice).
   */
  relayAsIs?: boolean;
  meta: AgentServeMetadata;
  /** Sent back as `x-request-id`. */
  requestId: string;
  /** Stops this attempt: the request was cancelled, the backend went down, or the first byte is late. */
  abort: AttemptAbort;
  /** Why the whole request was cancelled (client gone, deadline), if it was. */
  cancelled: () => Error | undefined;
  /** Called once, when the first byte is about to reach the client (no retry after this). */
  onCommit: () => void;
  /** When the request arrived (clock ms): time to first token is measured from here. */
  startedAtMs: number;
  /** Makes the relay of this API's event stream, given the metadata member to splice into it. */
  createRelay: (member: Buffer, receipt?: StreamReceipt) => StreamRelay;
  /** The Responses API: read the answer's response id (the engine stores it; later turns must come back). */
  readResponseId: boolean;
  /** An adapted request: turns the engine's JSON answer into the one the client expects. */
  restoreBody?: ((body: Buffer) => Buffer) | undefined;
  /** Extra upstream request headers (an engine API key). */
  upstreamHeaders: Record<string, string>;
  /** The route receipt of this attempt given the engine's usage (src/receipts), when the turn is receipted. */
  receipt?: StreamReceipt | undefined;
  /** Told a broken stream's error before its error event is written (the request's log line is written on close). */
  onStreamError?: ((broken: StreamBreak) => void) | undefined;
  /** [continuation] Set when the request's stream may be continued on another engine. */
  continuation?: AttemptContinuation | undefined;
}

export interface AttemptResult {
  status: number;
  /** Set when a stream broke after bytes reached the client (ended with an SSE error event). */
  streamError?: string;
  /** [continuation] The engine broke the stream and it was left open for another engine to continue. */
  broken?: StreamBreak;
  /** What the engine reported it used, when it did. */
  usage?: TokenUsage;
  /** The stream broke mid-way because of the engine (not the client): a failure for its health. */
  engineFault?: boolean;
  /** The Responses API: the id the engine gave the response. */
  responseId?: string;
}

/**
 * Runs one attempt. Rejects with AttemptFailure when the engine failed before anything reached the client
 * (the caller may retry elsewhere), or with the request's cancel reason when the client went away.
 */
export function runAttempt(env: AttemptEnv, plan: AttemptPlan, res: AnswerSink): Promise<AttemptResult> {
  return new Promise((resolve, reject) => new AttemptHandler(env, plan, res, resolve, reject).start());
}

type Mode = "pending" | "failed-status" | "buffer" | "stream";

class AttemptHandler implements Dispatcher.DispatchHandler {
  private upstream: Dispatcher.DispatchController | undefined;
  private mode: Mode = "pending";
  private status = 0;
  private readonly chunks: Buffer[] = [];
  private bufferedBytes = 0;
  private headers: Record<string, string | string[] | undefined> = {};
  /** The connection of the retry after a reused connection was found closed (at most one per attempt). */
  private fresh: FreshConnection | undefined;
  private committed = false;
  private settled = false;
  private relay: StreamRelay | undefined;
  private corked = false;
  private readonly untrack: () => void;
  /**
   * The attempt's one timer. Before the first byte it ends the wait for the engine's headers (streams) and its
   * first byte; once a stream's first byte went out, its stall (upstream.stream_stall_seconds). Rather than a
   * timer per deadline, or one restarted by every read, one timer that, when it fires, looks at what is due and
   * waits out what is left.
   */
  private cancelTimer: () => void;
  /** When the timer fires, on the timers' time. */
  private timerDueMs: number;
  /** When the attempt began, on the timers' time: the headers and first-byte deadlines count from here. */
  private readonly startedMs: number;
  /** The timer watches the stream for a stall (committed, stalls watched). */
  private watchingStall = false;
  /** When the engine's stream last moved (a read, or the client's drain that let it go on), on the timers' time. */
  private lastReadMs = 0;
  /** The engine's socket is paused because the client's is full: silence then is the client's, not a stall. */
  private waitingForClient = false;
  /** Reads of the engine's stream so far: a stall is declared only if none came in since the timer fired. */
  private reads = 0;
  private readonly onTimer = (): void => {
    if (this.settled) return;
    if (this.watchingStall) return this.onStall();
    if (this.committed) return;
    const elapsedMs = this.env.timers.nowMs() - this.startedMs;
    const firstByteLeftMs = this.firstByteTimeoutMs - elapsedMs;
    const headersLeftMs =
      this.plan.stream && this.mode === "pending" ? this.env.streamHeadersTimeoutMs - elapsedMs : Infinity;
    // Both passed: the earlier deadline is the one that ended it.
    if (firstByteLeftMs <= 0 && firstByteLeftMs <= headersLeftMs)
      return this.plan.abort.abort("first_byte_timeout" satisfies AbandonReason);
    if (headersLeftMs <= 0) return this.plan.abort.abort("stream_headers_timeout" satisfies AbandonReason);
    this.arm(Math.min(firstByteLeftMs, headersLeftMs));
  };
  private onStall(): void {
    const stallMs = this.env.streamStallTimeoutMs;
    if (this.waitingForClient) return this.arm(stallMs);
    const quietMs = this.env.timers.nowMs() - this.lastReadMs;
    if (quietMs < stallMs) return this.arm(stallMs - quietMs);
    // A busy event loop can run the timer before the reads that arrived meanwhile: look again after them.
    const reads = this.reads;
    setImmediate(() => {
      if (this.settled) return;
      if (this.waitingForClient || this.reads !== reads) this.arm(stallMs);
      else this.plan.abort.abort("stream_stall" satisfies AbandonReason);
    });
  }
  private readonly onAbort = (why: Error): void => this.upstream?.abort(why);
  private readonly onDrain = (): void => {
    this.waitingForClient = false;
    if (this.watchingStall) this.lastReadMs = this.env.timers.nowMs();
    this.upstream?.resume();
  };
  private readonly uncork = (): void => {
    this.corked = false;
    // end() already flushed and uncorked the socket, which may now carry the connection's next response.
    if (!this.res.writableEnded) this.res.uncork();
  };

  constructor(
    private readonly env: AttemptEnv,
    private readonly plan: AttemptPlan,
    private readonly res: AnswerSink,
    private readonly resolve: (result: AttemptResult) => void,
    private readonly reject: (err: Error) => void,
  ) {
    this.untrack = env.track(plan.backend.id, plan.abort);
    plan.abort.listen(this.onAbort);
    // Our own timer rather than undici's headersTimeout: undici's timers tick once a second, and this one
    // also covers a stream's first chunk. Its first-byte watch stops when the first byte is about to reach the
    // client.
    this.startedMs = env.timers.nowMs();
    const firstMs = plan.stream
      ? Math.min(this.firstByteTimeoutMs, env.streamHeadersTimeoutMs)
      : this.firstByteTimeoutMs;
    this.timerDueMs = this.startedMs + firstMs;
    this.cancelTimer = env.timers.after(firstMs, this.onTimer);
  }

  private arm(delayMs: number): void {
    this.timerDueMs = this.env.timers.nowMs() + delayMs;
    this.cancelTimer = this.env.timers.after(delayMs, this.onTimer);
  }

  private get firstByteTimeoutMs(): number {
    return this.plan.stream ? this.env.streamFirstByteTimeoutMs : this.env.firstByteTimeoutMs;
  }

  start(): void {
    const { pool, basePath } = this.plan.upstream;
    this.dispatch(pool, basePath);
  }

  private dispatch(dispatcher: Dispatcher, basePath: string): void {
    dispatcher.dispatch(
      {
        method: this.plan.method,
        path: basePath + this.plan.path,
        headers: this.plan.upstreamHeaders,
        body: this.plan.body,
        headersTimeout: 0,
        bodyTimeout: this.firstByteTimeoutMs,
      },
      this,
    );
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.upstream = controller;
    const stopped = this.plan.abort.reason;
    if (stopped !== undefined) controller.abort(stopReasonError(stopped));
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    this.status = statusCode;
    this.headers = headers;
    if (statusCode >= 500) this.mode = "failed-status";
    else this.mode = statusCode === 200 && this.plan.stream ? "stream" : "buffer";
    const declared = Number(headers["content-length"]);
    if (this.mode === "buffer" && declared > this.env.maxResponseBytes) this.tooLarge(controller, declared);
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return;
    if (this.mode === "buffer") {
      this.bufferedBytes += chunk.length;
      if (this.bufferedBytes > this.env.maxResponseBytes) return this.tooLarge(controller);
      this.chunks.push(chunk);
    } else if (this.mode === "stream") {
      if (!this.committed) this.beginStream();
      this.reads++;
      if (this.watchingStall) this.lastReadMs = this.env.timers.nowMs();
      const relay = this.relay!;
      this.write(relay.push(chunk), controller);
      const stopped = relay.stopped;
      if (stopped !== undefined) {
        // [continuation] The relay withheld the rest (an engine's error event, a continuation it cannot splice).
        this.endStreamWithError(stopped.message, stopped.code, stopped.engineFault, stopped.cause);
        controller.abort(new Error(stopped.message));
      }
    }
  }

  onResponseEnd(): void {
    if (this.settled) return;
    if (this.mode === "failed-status") {
      this.fail(
        new AttemptFailure(
          "upstream_error",
          `backend ${this.plan.backend.id} answered ${this.status}`,
          true,
          this.status === 503 ? retryAfterOf(this.headers["retry-after"]) : undefined,
        ),
      );
    } else if (this.mode === "buffer" && this.plan.continuation?.resume === true) {
      // A continuation the engine refused (a 4xx: it does not take continue_final_message, say): the client's
      // stream is open, so nothing of this answer can reach it; the next engine may do better.
      this.fail(
        new AttemptFailure(
          "upstream_error",
          `backend ${this.plan.backend.id} answered ${this.status} to the continuation`,
          false,
        ),
      );
    } else if (this.mode === "buffer") {
      const engineBody = Buffer.concat(this.chunks, this.bufferedBytes);
      this.chunks.length = 0;
      if (this.plan.relayAsIs === true) return this.relayAsIs(engineBody);
      const restore = this.status === 200 ? this.plan.restoreBody : undefined;
      const body = restore === undefined ? engineBody : restore(engineBody);
      const usage = this.status === 200 ? extractUsage(body) : undefined;
      const responseId = this.status === 200 && this.plan.readResponseId ? responseIdOf(body) : undefined;
      const receipt = usage === undefined ? undefined : this.plan.receipt?.(usage, responseId);
      if (receipt !== undefined) this.plan.meta.receipt = receipt;
      const json =
        this.status === 200 ? spliceMemberIntoJson(body, metadataMember(this.plan.meta)) : undefined;
      if (this.status === 200 && (json === undefined || !isJsonType(this.headers["content-type"]))) {
        // Retried elsewhere: an HTML error page from a proxy in front of the engine, say.
        const type = this.headers["content-type"];
        return this.fail(
          new AttemptFailure(
            "upstream_error",
            `backend ${this.plan.backend.id} answered 200 with a body that is not a JSON object` +
              (typeof type === "string" ? ` (content-type ${type})` : ""),
            true,
          ),
        );
      }
      this.commit();
      this.writeBuffered(json ?? body);
      const result: AttemptResult = { status: this.status };
      if (this.status === 200) {
        if (usage !== undefined) result.usage = usage;
        if (responseId !== undefined) result.responseId = responseId;
      }
      this.succeed(result);
    } else if (!this.committed) {
      this.fail(
        new AttemptFailure(
          "upstream_error",
          `backend ${this.plan.backend.id} closed the stream before any data`,
          true,
        ),
      );
    } else {
      this.write(this.relay!.flush());
      const relay = this.relay!;
      if (relay.complete) {
        this.res.end();
        this.succeedWholeStream(relay);
      } else {
        this.endStreamWithError(
          `backend ${this.plan.backend.id} ended the stream before its end event, mid-answer`,
        );
      }
    }
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    if (this.settled) return;
    const cancelled = this.plan.cancelled();
    if (cancelled !== undefined) {
      // The client hung up after the stream's end event (Codex leaves once it has read response.completed),
      // before the engine closed its stream: the answer was whole, and its usage and receipt stand.
      if (cancelled instanceof ClientClosedError && this.mode === "stream" && this.relay?.complete === true)
        return this.succeedWholeStream(this.relay);
      // The deadline or a shutdown ended a stream the client still reads: end it like every other broken stream.
      if (this.committed && this.mode === "stream" && !(cancelled instanceof ClientClosedError)) {
        const code = cancelled instanceof GatewayError ? cancelled.code : "upstream_error";
        return this.endStreamWithError(`${cancelled.message}, mid-answer`, code, false);
      }
      return this.fail(cancelled);
    }
    const stopped = this.plan.abort.reason;
    // A request-level cancel was handled above, so a reason left here is the gateway's own.
    const abandoned = typeof stopped === "string" ? stopped : undefined;
    if (
      this.status === 0 &&
      abandoned === undefined &&
      this.fresh === undefined &&
      isStaleConnectionError(error)
    ) {
      // A kept-alive connection the engine had closed: nothing was answered, so the request goes again on
      // a connection of its own, to the same engine; the engine is not to blame.
      this.env.logger.debug(
        { backend: this.plan.backend.id, err: error.message },
        "reused connection closed; retrying on a fresh one",
      );
      this.fresh = this.env.freshConnection(this.plan.backend);
      this.upstream = undefined;
      this.dispatch(this.fresh.dispatcher, this.fresh.basePath);
      return;
    }
    const failure = classifyUpstreamError(error, this.plan.backend.id, abandoned, this.committed);
    if (!this.committed) return this.fail(failure);
    // Bytes already reached the client, so no retry: an error event, the metadata, and a proper end.
    this.endStreamWithError(failure.message, failure.code, failure.healthSignal, error.message);
  }

  /** The first byte is about to reach the client. `watchStall`: the timer goes on, for the stream's stalls. */
  private commit(watchStall = false): void {
    this.committed = true;
    if (!watchStall) this.cancelTimer();
    this.untrack();
    this.plan.onCommit();
  }

  private beginStream(): void {
    const stallMs = this.env.streamStallTimeoutMs;
    this.commit(stallMs > 0);
    if (stallMs > 0) {
      this.lastReadMs = this.env.timers.nowMs();
      this.watchingStall = true;
      // The timer set for the first byte may be due later than a stall from now would be.
      if (this.timerDueMs > this.lastReadMs + stallMs) {
        this.cancelTimer();
        this.arm(stallMs);
      }
    }
    if (this.plan.continuation?.resume === true) {
      // [continuation] The client's stream began on an earlier engine: its headers and first token are behind it.
      this.relay = this.plan.createRelay(metadataMember(this.plan.meta), this.plan.receipt);
      return;
    }
    this.env.firstToken(this.plan.meta.tier, (this.env.nowMs() - this.plan.startedAtMs) / 1000);
    openEventStream(this.res, answerHead(this.plan.meta, this.plan.requestId));
    this.relay = this.plan.createRelay(metadataMember(this.plan.meta), this.plan.receipt);
  }

  /**
   * Writes to the client, corked until the end of the current tick: what the engine sent in one read (often
   * every event of a short answer, and the stream's end) leaves in one system call instead of one per
   * write. When the client's buffer is full, pauses the engine's socket until it drains.
   */
  private write(buffers: Buffer[], controller?: Dispatcher.DispatchController): void {
    if (buffers.length === 0 || this.res.destroyed) return;
    if (!this.corked) {
      this.corked = true;
      this.res.cork();
      process.nextTick(this.uncork);
    }
    // One chunk of the chunked encoding for all of them: node writes a size line, the data and a line end
    // per write() call, so copying a few kilobytes together is cheaper than three writes per slice.
    const full = !this.res.write(buffers.length === 1 ? buffers[0]! : Buffer.concat(buffers));
    if (full && controller !== undefined) {
      this.waitingForClient = true;
      controller.pause();
      this.res.once("drain", this.onDrain);
    }
  }

  /** The body is past upstream.max_response_bytes: stop reading it, free what was held, answer 502. */
  private tooLarge(controller: Dispatcher.DispatchController, declared?: number): void {
    const limit = this.env.maxResponseBytes;
    this.chunks.length = 0;
    const size = declared === undefined ? `more than ${limit}` : String(declared);
    const message = `backend ${this.plan.backend.id} answered ${size} bytes, over upstream.max_response_bytes (${limit})`;
    this.env.logger.warn(
      { backend: this.plan.backend.id, limitBytes: limit, declaredBytes: declared },
      "answer too large",
    );
    const error = new GatewayError("upstream_error", message);
    this.fail(error);
    controller.abort(error);
  }

  private writeBuffered(body: Buffer): void {
    const out = this.status === 200 ? body : engineErrorBody(this.plan.path, body, this.status);
    const head = answerHead(this.plan.meta, this.plan.requestId);
    // An engine's own 429 says when to come back: the client hears it too.
    const retryAfter = this.status === 429 ? retryAfterOf(this.headers["retry-after"]) : undefined;
    if (retryAfter !== undefined) head.push("retry-after", String(retryAfter));
    answerJson(this.res, this.status, head, out);
  }

  /** A stored response's answer: its body as the engine sent it (errors in the OpenAI envelope). */
  private relayAsIs(engineBody: Buffer): void {
    this.commit();
    const out = this.status === 200 ? engineBody : engineErrorBody(this.plan.path, engineBody, this.status);
    const { requestId } = this.plan;
    const head = [
      "x-request-id",
      requestId,
      "request-id",
      requestId,
      "x-agent-serve-backend",
      this.plan.backend.id,
    ];
    answerJson(this.res, this.status, head, out);
    this.succeed({ status: this.status });
  }

  private endStreamWithError(
    message: string,
    code = "upstream_error",
    engineFault = true,
    cause?: string,
  ): void {
    const relay = this.relay!;
    const broken: StreamBreak = { message, code, engineFault, cause };
    if (engineFault && this.plan.continuation?.keepOpenOnBreak() === true && !this.res.destroyed) {
      // [continuation] The stream stays open: the attempt loop sends the rest of the answer to another engine.
      return this.succeed({ status: 200, broken });
    }
    this.plan.onStreamError?.(broken);
    if (!this.res.destroyed) {
      this.write(relay.errorEnding(message, code));
      this.res.end();
    }
    const result: AttemptResult = { status: 200, streamError: message, engineFault };
    if (relay.responseId !== undefined) result.responseId = relay.responseId;
    this.succeed(result);
  }

  /** A stream relayed to its end event: the attempt's result, with the engine's usage and its receipt. */
  private succeedWholeStream(relay: StreamRelay): void {
    if (relay.usage !== undefined) this.plan.receipt?.(relay.usage, relay.responseId);
    const result: AttemptResult = { status: 200 };
    if (relay.usage !== undefined) result.usage = relay.usage;
    if (relay.responseId !== undefined) result.responseId = relay.responseId;
    this.succeed(result);
  }

  private cleanup(): void {
    this.fresh?.close();
    this.cancelTimer();
    this.plan.abort.listen(undefined);
    this.res.off("drain", this.onDrain);
    this.untrack();
  }

  private succeed(result: AttemptResult): void {
    if (this.settled) return;
    this.settled = true;
    this.cleanup();
    this.resolve(result);
  }

  private fail(err: Error): void {
    if (this.settled) return;
    this.settled = true;
    this.cleanup();
    this.reject(err);
  }
}

/** A missing content type is let through (engines always send one; a test double may not). */
function isJsonType(type: string | string[] | undefined): boolean {
  return typeof type !== "string" || /json/i.test(type);
}

/** The `id` of a Responses API answer (a small parse: such bodies are the size of one turn's output). */
export function responseIdOf(body: Buffer): string | undefined {
  try {
    const id = (JSON.parse(body.toString("utf8")) as { id?: unknown }).id;
    return typeof id === "string" ? id : undefined;
  } catch {
    return undefined;
  }
}
