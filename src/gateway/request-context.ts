// A request's record: the facts its stages returned, for the one log line, the trace and the request metrics at
// the end, and the one channel that cancels it. Written where the request is born (server.ts), where it is
// cancelled (cancelRequest; the attempt in progress registers here to be stopped), and once by its handler
// when it ends (the turn's facts: completion-handler.ts recordTurn); the server writes the record once both
// the response and the handler are done.
import type { AttemptAbort } from "./attempt-abort.js";
import type { Receipt } from "../receipts/receipt-rules.js";
import type { ApiKeyEntry } from "./client-auth.js";

export interface RequestContext {
  requestId: string;
  startedAtMs: number;
  method: string;
  path: string;
  sessionId?: string | undefined;
  /** Which of affinity.session_keys named the session (`header:...`, `body:...`, `responses_chain`). */
  sessionSource?: string | undefined;
  agentId?: string | undefined;
  /** The priority band the request waited in (admission.scheduling), for the log line. */
  band?: number;
  /** The last message, only when server.log_prompts is on. */
  prompt?: string;
  tier?: string;
  backend?: string;
  reason?: string;
  affinityHit?: boolean;
  attempts: number;
  queueWaitMs: number;
  errorCode?: string;
  /** A stream that ended in an error event after bytes reached the client: the error, its code and cause. */
  streamError?: string | undefined;
  streamErrorCode?: string | undefined;
  streamErrorCause?: string | undefined;
  /** The answer was continued on another engine (src/gateway/continuation): how that ended, and from where. */
  migrated?: string;
  clientClosed?: boolean;
  /** Set once when the client leaves or the deadline passes; the request stops at its next step. */
  cancelReason?: Error;
  /** The client's API key entry, checked before anything else of a /v1 request (none without keys). */
  apiKey?: ApiKeyEntry | undefined;
  /** The attempt in progress: cancelling the request stops it (one per attempt, none per request). */
  activeAttempt?: AttemptAbort;
  /** What the gateway changed in the request for the engine (adaptation), for the log line. */
  adapted?: readonly string[];
  /** The turn's route receipt (src/receipts), once the engine reported its usage. */
  receipt?: Receipt;
}

/**
 * A request's record with every member present from its birth (undefined until written): the record takes its
 * full shape at once, where a literal of six members grew a dozen more as the request went (a map transition and
 * a reallocated property store each).
 */
export function newRequestContext(
  requestId: string,
  startedAtMs: number,
  method: string,
  path: string,
): RequestContext {
  return {
    requestId,
    startedAtMs,
    method,
    path,
    sessionId: undefined,
    sessionSource: undefined,
    agentId: undefined,
    band: undefined,
    prompt: undefined,
    tier: undefined,
    backend: undefined,
    reason: undefined,
    affinityHit: undefined,
    attempts: 0,
    queueWaitMs: 0,
    errorCode: undefined,
    streamError: undefined,
    streamErrorCode: undefined,
    streamErrorCause: undefined,
    migrated: undefined,
    clientClosed: undefined,
    cancelReason: undefined,
    apiKey: undefined,
    activeAttempt: undefined,
    adapted: undefined,
    receipt: undefined,
  };
}

/** Cancels a request: records why and aborts its attempt in progress (queued or talking to an engine). */
export function cancelRequest(ctx: RequestContext, reason: Error): void {
  if (ctx.cancelReason !== undefined) return;
  ctx.cancelReason = reason;
  ctx.activeAttempt?.abort(reason);
}
