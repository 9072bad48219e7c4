// One attempt of a completion on one engine, on undici's dispatch API: no response stream objects, chunks
// go from the engine's socket to the client's as they arrive (buffered only for non-streaming answers).
import type { ServerResponse } from "node:http";
import type { Dispatcher } from "undici";
import type { Backend } from "../backends/backend.js";
import { stopReasonError, type AttemptAbort } from "./attempt-abort.js";
import { engineErrorEnvelope } from "./engine-error.js";
import {
  metadataHeaders,
  metadataMember,
  spliceMemberIntoJson,
  type AgentServeMetadata,
} from "./response-metadata.js";
import type { StreamRelay } from "./stream-relay.js";
import { extractUsage, type TokenUsage } from "./usage.js";
import { AttemptFailure, classifyUpstreamError, type AbandonReason } from "./upstream-failure.js";

/** What an attempt needs from the gateway besides its plan (built once per gateway, not per request). */
export interface AttemptEnv {
  readonly nowMs: () => number;
  readonly firstByteTimeoutMs: number;
  /** Registers the attempt so that a backend going down abandons it; returns the undo. */
  readonly track: (backendId: string, abort: AttemptAbort) => () => void;
  /** A stream's time to first token, in seconds. */
  readonly firstToken: (tier: string, seconds: number) => void;
}

export interface AttemptPlan {
  backend: Backend;
  /** The backend's pooled connections and base path. */
  upstream: { pool: Dispatcher; basePath: string };
  path: string;
  body: Buffer;
  stream: boolean;
  meta: AgentServeMetadata;
  /** Extra response headers (request id). */
  headers: Record<string, string>;
  /** Stops this attempt: the request was cancelled, the backend went down, or the first byte is late. */
  abort: AttemptAbort;
  /** Why the whole request was cancelled (client gone, deadline), if it was. */
  cancelled: () => Error | undefined;
  /** Called once, when the first byte is about to reach the client (no retry after this). */
  onCommit: () => void;
  /** When the request arrived (clock ms): time to first token is measured from here. */
  startedAtMs: number;
  /** Makes the relay of this API's event stream, given the metadata member to splice into it. */
  createRelay: (member: Buffer) => StreamRelay;
  /** The Responses API: read the answer's response id (the engine stores it; later turns must come back). */
  readResponseId: boolean;
  /** Extra upstream request headers (an engine API key). */
  upstreamHeaders: Record<string, string>;
}

export interface AttemptResult {
  status: number;
  /** Set when a stream broke after bytes reached the client (ended with an SSE error event). */
  streamError?: string;
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
export function runAttempt(env: AttemptEnv, plan: AttemptPlan, res: ServerResponse): Promise<AttemptResult> {
  return new Promise((resolve, reject) => new AttemptHandler(env, plan, res, resolve, reject).start());
}

type Mode = "pending" | "failed-status" | "buffer" | "stream";

class AttemptHandler implements Dispatcher.DispatchHandler {
  private upstream: Dispatcher.DispatchController | undefined;
  private mode: Mode = "pending";
  private status = 0;
  private readonly chunks: Buffer[] = [];
  private committed = false;
  private settled = false;
  private relay: StreamRelay | undefined;
  private corked = false;
  private readonly untrack: () => void;
  private readonly firstByteTimer: NodeJS.Timeout;
  private readonly onAbort = (why: Error): void => this.upstream?.abort(why);
  private readonly onDrain = (): void => this.upstream?.resume();
  private readonly uncork = (): void => {
    this.corked = false;
    // end() already flushed and uncorked the socket, which may now carry the connection's next response.
    if (!this.res.writableEnded) this.res.uncork();
  };

  constructor(
    private readonly env: AttemptEnv,
    private readonly plan: AttemptPlan,
    private readonly res: ServerResponse,
    private readonly resolve: (result: AttemptResult) => void,
    private readonly reject: (err: Error) => void,
  ) {
    this.untrack = env.track(plan.backend.id, plan.abort);
    plan.abort.listen(this.onAbort);
    // Our own timer rather than undici's headersTimeout: undici's timers tick once a second, and this one
    // also covers a stream's first chunk. It stops when the first byte is about to reach the client.
    this.firstByteTimer = setTimeout(
      () => plan.abort.abort("first_byte_timeout" satisfies AbandonReason),
      env.firstByteTimeoutMs,
    );
  }

  start(): void {
    const { pool, basePath } = this.plan.upstream;
    pool.dispatch(
      {
        method: "POST",
        path: basePath + this.plan.path,
        headers: this.plan.upstreamHeaders,
        body: this.plan.body,
        headersTimeout: 0,
        bodyTimeout: this.env.firstByteTimeoutMs,
      },
      this,
    );
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.upstream = controller;
    const stopped = this.plan.abort.reason;
    if (stopped !== undefined) controller.abort(stopReasonError(stopped));
  }

  onResponseStart(_controller: Dispatcher.DispatchController, statusCode: number): void {
    this.status = statusCode;
    if (statusCode >= 500) this.mode = "failed-status";
    else this.mode = statusCode === 200 && this.plan.stream ? "stream" : "buffer";
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.mode === "buffer") {
      this.chunks.push(chunk);
    } else if (this.mode === "stream") {
      if (!this.committed) this.beginStream();
      this.write(this.relay!.push(chunk), controller);
    }
  }

  onResponseEnd(): void {
    if (this.mode === "failed-status") {
      this.fail(
        new AttemptFailure("upstream_error", `backend ${this.plan.backend.id} answered ${this.status}`, true),
      );
    } else if (this.mode === "buffer") {
      this.commit();
      const body = Buffer.concat(this.chunks);
      this.writeBuffered(body);
      const result: AttemptResult = { status: this.status };
      if (this.status === 200) {
        const usage = extractUsage(body);
        if (usage !== undefined) result.usage = usage;
        const responseId = this.plan.readResponseId ? responseIdOf(body) : undefined;
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
        const result: AttemptResult = { status: 200 };
        if (relay.usage !== undefined) result.usage = relay.usage;
        if (relay.responseId !== undefined) result.responseId = relay.responseId;
        this.succeed(result);
      } else {
        this.endStreamWithError(`backend ${this.plan.backend.id} ended the stream without [DONE]`);
      }
    }
  }

  onResponseError(_controller: Dispatcher.DispatchController, error: Error): void {
    const cancelled = this.plan.cancelled();
    if (cancelled !== undefined) return this.fail(cancelled);
    const stopped = this.plan.abort.reason;
    // A request-level cancel was handled above, so a reason left here is the gateway's own.
    const abandoned = typeof stopped === "string" ? stopped : undefined;
    const failure = classifyUpstreamError(error, this.plan.backend.id, abandoned);
    if (!this.committed) return this.fail(failure);
    // Bytes already reached the client, so no retry: an error event, the metadata, and a proper end.
    this.endStreamWithError(failure.message, failure.code, failure.healthSignal);
  }

  private commit(): void {
    this.committed = true;
    clearTimeout(this.firstByteTimer);
    this.untrack();
    this.plan.onCommit();
  }

  private beginStream(): void {
    this.commit();
    this.env.firstToken(this.plan.meta.tier, (this.env.nowMs() - this.plan.startedAtMs) / 1000);
    this.res.writeHead(200, {
      ...metadataHeaders(this.plan.meta),
      ...this.plan.headers,
      "content-type": "text/event-stream; charset=utf-8",
      "cache-control": "no-cache",
      "x-accel-buffering": "no",
    });
    this.relay = this.plan.createRelay(metadataMember(this.plan.meta));
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
      controller.pause();
      this.res.once("drain", this.onDrain);
    }
  }

  private writeBuffered(body: Buffer): void {
    const ok = this.status === 200;
    const out = ok
      ? (spliceMemberIntoJson(body, metadataMember(this.plan.meta)) ?? body)
      : Buffer.from(JSON.stringify(engineErrorEnvelope(body, this.status)));
    this.res.writeHead(this.status, {
      ...metadataHeaders(this.plan.meta),
      ...this.plan.headers,
      "content-type": "application/json",
      "content-length": out.length,
    });
    this.res.end(out);
  }

  private endStreamWithError(message: string, code = "upstream_error", engineFault = true): void {
    const relay = this.relay!;
    if (!this.res.destroyed) {
      this.write(relay.errorEnding(message, code));
      this.res.end();
    }
    const result: AttemptResult = { status: 200, streamError: message, engineFault };
    if (relay.responseId !== undefined) result.responseId = relay.responseId;
    this.succeed(result);
  }

  private cleanup(): void {
    clearTimeout(this.firstByteTimer);
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

/** The `id` of a Responses API answer (a small parse: such bodies are the size of one turn's output). */
function responseIdOf(body: Buffer): string | undefined {
  try {
    const id = (JSON.parse(body.toString("utf8")) as { id?: unknown }).id;
    return typeof id === "string" ? id : undefined;
  } catch {
    return undefined;
  }
}
