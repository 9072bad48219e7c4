// One attempt of a completion on one engine: send, then relay the answer (buffered JSON or SSE pass-through).
import type { ServerResponse } from "node:http";
import type { Dispatcher } from "undici";
import type { Backend } from "../backends/backend.js";
import { engineErrorEnvelope } from "./engine-error.js";
import { metadataHeaders, spliceMetadataIntoJson, type AgentServeMetadata } from "./response-metadata.js";
import type { GatewayRuntime } from "./runtime.js";
import { SseMetadataSplicer, sseEvent } from "./sse-metadata.js";
import { AttemptFailure, classifyUpstreamError, type AbandonReason } from "./upstream-failure.js";

export interface AttemptPlan {
  backend: Backend;
  path: string;
  body: Buffer;
  stream: boolean;
  meta: AgentServeMetadata;
  /** Extra response headers (request id). */
  headers: Record<string, string>;
  /** Aborts this attempt: the request was cancelled, the backend went down, or the first byte is late. */
  controller: AbortController;
  /** Why the whole request was cancelled (client gone, deadline), if it was. */
  cancelled: () => Error | undefined;
  /** Called once, when the first byte is about to reach the client (no retry after this). */
  onCommit: () => void;
}

export interface AttemptResult {
  status: number;
  /** Set when a stream broke after bytes reached the client (ended with an SSE error event). */
  streamError?: string;
}

const JSON_HEADERS = { "content-type": "application/json" };
const DONE_EVENT = Buffer.from("data: [DONE]\n\n");

/**
 * Runs one attempt. Throws AttemptFailure when the engine failed before anything reached the client (the
 * caller may retry elsewhere); rethrows the request's cancel reason when the client went away.
 */
export async function runAttempt(
  rt: GatewayRuntime,
  plan: AttemptPlan,
  res: ServerResponse,
): Promise<AttemptResult> {
  const { backend } = plan;
  const attemptController = plan.controller;
  const untrack = rt.attempts.track(backend.id, attemptController);
  const signal = attemptController.signal;
  // Our own timer rather than undici's headersTimeout: undici's timers tick once a second, and this one
  // must also cover a stream's first chunk. It is cleared when the first byte is about to reach the client.
  const firstByteTimer = setTimeout(
    () => attemptController.abort("first_byte_timeout" satisfies AbandonReason),
    rt.settings.firstByteTimeoutMs,
  );
  const commit = (): void => {
    clearTimeout(firstByteTimer);
    untrack();
    plan.onCommit();
  };
  const failed = (err: unknown): Error => {
    const cancelled = plan.cancelled();
    if (cancelled !== undefined) return cancelled;
    const abandoned = attemptController.signal.aborted
      ? (attemptController.signal.reason as AbandonReason)
      : undefined;
    return err instanceof AttemptFailure ? err : classifyUpstreamError(err, backend.id, abandoned);
  };
  try {
    const { pool, basePath } = rt.pools.get(backend);
    let response: Dispatcher.ResponseData;
    try {
      response = await pool.request({
        method: "POST",
        path: basePath + plan.path,
        headers: JSON_HEADERS,
        body: plan.body,
        signal,
        headersTimeout: 0,
        bodyTimeout: rt.settings.firstByteTimeoutMs,
      });
    } catch (err) {
      throw failed(err);
    }
    const status = response.statusCode;
    if (status >= 500) {
      await response.body.dump().catch(() => undefined);
      throw new AttemptFailure("upstream_error", `backend ${backend.id} answered ${status}`, true);
    }
    if (status !== 200 || !plan.stream) {
      let body: Buffer;
      try {
        body = Buffer.from(await response.body.arrayBuffer());
      } catch (err) {
        throw failed(err);
      }
      commit();
      return writeBuffered(res, plan, status, body);
    }
    return await relayStream(rt, plan, response, res, commit, failed);
  } finally {
    clearTimeout(firstByteTimer);
    untrack();
  }
}

function writeBuffered(res: ServerResponse, plan: AttemptPlan, status: number, body: Buffer): AttemptResult {
  const headers = { ...metadataHeaders(plan.meta), ...plan.headers, "content-type": "application/json" };
  const out =
    status === 200
      ? (spliceMetadataIntoJson(body, plan.meta) ?? body)
      : Buffer.from(JSON.stringify(engineErrorEnvelope(body, status)));
  res.writeHead(status, { ...headers, "content-length": out.length });
  res.end(out);
  return { status };
}

async function relayStream(
  rt: GatewayRuntime,
  plan: AttemptPlan,
  response: Dispatcher.ResponseData,
  res: ServerResponse,
  commit: () => void,
  failed: (err: unknown) => Error,
): Promise<AttemptResult> {
  const chunks = response.body[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  // Nothing is sent to the client before the engine's first chunk: a failure until then is still retryable.
  let first: IteratorResult<Buffer>;
  try {
    first = await chunks.next();
  } catch (err) {
    throw failed(err);
  }
  if (first.done) {
    throw new AttemptFailure(
      "upstream_error",
      `backend ${plan.backend.id} closed the stream before any data`,
      true,
    );
  }
  commit();
  res.writeHead(200, {
    ...metadataHeaders(plan.meta),
    ...plan.headers,
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
  });
  const splicer = new SseMetadataSplicer(
    sseEvent({
      id: `agentserve-${plan.headers["x-request-id"] ?? ""}`,
      object: plan.path === "/v1/completions" ? "text_completion" : "chat.completion.chunk",
      choices: [],
      x_agent_serve: plan.meta,
    }),
  );
  let streamError: string | undefined;
  try {
    await writeAll(res, splicer.push(first.value));
    for (;;) {
      const next = await chunks.next();
      if (next.done) break;
      await writeAll(res, splicer.push(next.value));
    }
    await writeAll(res, splicer.flush());
    if (!splicer.sawDone) streamError = `backend ${plan.backend.id} ended the stream without [DONE]`;
  } catch (err) {
    const failure = failed(err);
    if (plan.cancelled() !== undefined) throw failure; // the client left: nothing more to write
    streamError = failure.message;
    if (failure instanceof AttemptFailure && failure.healthSignal) {
      rt.registry.recordOutcome(plan.backend, false, "request");
    }
  }
  if (streamError !== undefined && !res.destroyed) {
    // Bytes already reached the client, so no retry: a clear error event, the metadata, and a proper end.
    const code = streamError.includes("timed out") ? "upstream_timeout" : "upstream_error";
    await writeAll(res, [
      sseEvent({ error: { message: streamError, type: "upstream_error", param: null, code } }),
      ...(splicer.sawDone ? [] : splicer.push(DONE_EVENT)),
    ]);
  }
  res.end();
  return streamError === undefined ? { status: 200 } : { status: 200, streamError };
}

/** Writes buffers, waiting for 'drain' when the client reads slower than the engine writes. */
async function writeAll(res: ServerResponse, buffers: Buffer[]): Promise<void> {
  for (const buffer of buffers) {
    if (res.destroyed) return;
    if (!res.write(buffer)) {
      await new Promise<void>((resolve) => {
        const done = (): void => {
          res.off("drain", done);
          res.off("close", done);
          resolve();
        };
        res.on("drain", done);
        res.on("close", done);
      });
    }
  }
}
