// GET and DELETE /v1/responses/{id} (and POST .../cancel): asked of the one engine that stores the response,
// through the attempt path (attempt.ts, with stored-response-call.ts's plan) like every engine call, its answer
// relayed as the engine gave it.
import type { IncomingMessage, ServerResponse } from "node:http";
import { GatewayError } from "../core/errors.js";
import { AttemptAbort } from "./attempt-abort.js";
import { runAttempt } from "./attempt.js";
import { chargedAgent } from "./client-auth.js";
import { parseClientHeaders } from "./client-headers.js";
import type { RequestContext } from "./request-context.js";
import { liveOwner } from "./response-chain.js";
import type { GatewayParts, LiveState } from "./runtime.js";
import { storedResponsePlan } from "./stored-response-call.js";

const RESPONSE_PATH = /^\/v1\/responses\/([^/]+)(\/cancel)?$/;

/** True when the path is one of the stored-response routes. */
export function isStoredResponsePath(path: string): boolean {
  return RESPONSE_PATH.test(path);
}

/** What the stored-response routes use of the gateway. */
export type StoredResponseDeps = Pick<GatewayParts, "registry" | "pools" | "responseOwners">;

export async function handleStoredResponse(
  rt: StoredResponseDeps,
  live: LiveState,
  req: IncomingMessage,
  res: ServerResponse,
  ctx: RequestContext,
): Promise<void> {
  // The API key was checked by the server, before anything else of this /v1 request.
  const client = parseClientHeaders(req.headersDistinct);
  ctx.agentId = chargedAgent(ctx.apiKey, client.agentId).agentId; // recorded at once: the first fact of the request
  const [, encodedId, cancel] = RESPONSE_PATH.exec(ctx.path)!;
  const method = req.method ?? "GET";
  const allowed: readonly string[] = cancel === undefined ? ["GET", "DELETE"] : ["POST"];
  if (!isStoredMethod(method) || !allowed.includes(method)) {
    throw new GatewayError("method_not_allowed", `${method} is not allowed on ${ctx.path}`);
  }
  let responseId: string;
  try {
    responseId = decodeURIComponent(encodedId!);
  } catch {
    throw new GatewayError("invalid_request", "the response id in the path is not valid percent-encoding");
  }
  const known = await rt.responseOwners.owner(responseId);
  if (known === undefined) {
    throw new GatewayError(
      "response_not_found",
      `no response '${responseId}' passed through this gateway (or it was forgotten after responses.ttl_seconds)`,
    );
  }
  const backend = liveOwner(rt.registry, responseId, known.backendId);
  const query = req.url?.includes("?") === true ? req.url.slice(req.url.indexOf("?")) : "";
  try {
    // Through the attempt path, as every engine call: bounded by the first-byte timeout and
    // upstream.max_response_bytes, abandoned when the engine goes down or the request is cancelled. No
    // failover: only this engine stores the response; a 5xx or an unreachable engine is a 502 or 504.
    const abort = new AttemptAbort();
    ctx.activeAttempt = abort;
    if (ctx.cancelReason !== undefined) throw ctx.cancelReason;
    const result = await runAttempt(
      live.attemptEnv,
      storedResponsePlan(rt.pools, {
        backend,
        method,
        responseId,
        action: cancel === undefined ? "" : "/cancel",
        query,
        requestId: ctx.requestId,
        abort,
        cancelled: () => ctx.cancelReason,
        startedAtMs: ctx.startedAtMs,
      }),
      res,
    );
    if (method === "DELETE" && result.status === 200) rt.responseOwners.forget(responseId);
  } finally {
    ctx.backend = backend.id;
    ctx.tier = backend.tier;
  }
}

function isStoredMethod(method: string): method is "GET" | "DELETE" | "POST" {
  return method === "GET" || method === "DELETE" || method === "POST";
}
