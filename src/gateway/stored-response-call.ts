// A call about one stored response of the Responses API (its read, delete or cancel) as the plan of one attempt:
// the stored-response routes and the owner search both reach engines through runAttempt (attempt.ts) with it,
// as every engine call does. Nothing is placed and nothing fails over: only the engine that stores a response
// can answer for it.
import type { Backend } from "../backends/backend.js";
import { GatewayError } from "../core/errors.js";
import type { AttemptAbort } from "./attempt-abort.js";
import type { AttemptPlan } from "./attempt.js";
import type { UpstreamPools } from "./upstream-pools.js";

export interface StoredResponseCall {
  readonly backend: Backend;
  readonly method: "GET" | "DELETE" | "POST";
  readonly responseId: string;
  /** The route past the id: "/cancel" or "". */
  readonly action: "" | "/cancel";
  /** The client's query string, "?..." or "" (passed on as it came). */
  readonly query: string;
  readonly requestId: string;
  /** Stops this call (the request cancelled, the engine gone, the search over). */
  readonly abort: AttemptAbort;
  /** Why the whole call was cancelled, if it was (what the attempt fails with then). */
  readonly cancelled: () => Error | undefined;
  /** Clock ms when the call began. */
  readonly startedAtMs: number;
}

/** The attempt plan of a stored response's call: its answer is relayed as the engine gave it. */
export function storedResponsePlan(pools: Pick<UpstreamPools, "get">, call: StoredResponseCall): AttemptPlan {
  const { backend } = call;
  return {
    backend,
    upstream: pools.get(backend),
    method: call.method,
    path: `/v1/responses/${encodeURIComponent(call.responseId)}${call.action}${call.query}`,
    body: undefined,
    stream: false,
    relayAsIs: true,
    // Never spliced into the answer (relayed as is): the plan's record of where it went.
    meta: {
      session_id: null,
      session_source: null,
      tier: backend.tier,
      tier_source: "model",
      backend_id: backend.id,
      affinity_hit: false,
      reason: "no_session",
      queue_wait_ms: 0,
      attempts: 1,
      adapted: undefined,
      receipt: undefined,
      migrated: undefined,
    },
    requestId: call.requestId,
    abort: call.abort,
    cancelled: call.cancelled,
    onCommit: () => undefined,
    startedAtMs: call.startedAtMs,
    createRelay: noStream,
    readResponseId: false,
    upstreamHeaders: backend.upstreamHeaders,
  };
}

/** A stored response's calls never stream. */
function noStream(): never {
  throw new GatewayError("internal_error", "a stored response's answer is not a stream");
}
