// GET and DELETE /v1/responses/{id} (and POST .../cancel): asked of the one engine that stores the response.
import type { IncomingMessage, ServerResponse } from "node:http";
import { GatewayError } from "../core/errors.js";
import { writeJson } from "../core/write-json.js";
import { AttemptAbort } from "./attempt-abort.js";
import { chargedAgent } from "./client-auth.js";
import { parseClientHeaders } from "./client-headers.js";
import { engineErrorEnvelope } from "./engine-error.js";
import type { RequestContext } from "./request-context.js";
import { liveOwner } from "./response-chain.js";
import type { GatewayParts, LiveState } from "./runtime.js";
import { classifyUpstreamError } from "./upstream-failure.js";

/** A stored response is one turn's output: more than this from an engine is not an answer to relay. */
const MAX_STORED_RESPONSE_BYTES = 64 * 1024 * 1024;
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
  ctx.agentId = chargedAgent(ctx.apiKey, client.agentId).agentId;
  const [, encodedId, cancel] = RESPONSE_PATH.exec(ctx.path)!;
  const method = req.method ?? "GET";
  const allowed = cancel === undefined ? ["GET", "DELETE"] : ["POST"];
  if (!allowed.includes(method)) {
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
  ctx.backend = backend.id;
  ctx.tier = backend.tier;
  const { pool, basePath } = rt.pools.get(backend);
  const query = req.url?.includes("?") === true ? req.url.slice(req.url.indexOf("?")) : "";

  const abort = new AttemptAbort();
  const controller = new AbortController();
  abort.listen((why) => controller.abort(why));
  ctx.activeAttempt = abort;
  let answer;
  try {
    answer = await pool.request({
      method,
      path: `${basePath}/v1/responses/${encodeURIComponent(responseId)}${cancel ?? ""}${query}`,
      headers: backend.upstreamHeaders,
      signal: controller.signal,
      headersTimeout: live.settings.firstByteTimeoutMs,
      bodyTimeout: live.settings.firstByteTimeoutMs,
    });
  } catch (err) {
    if (ctx.cancelReason !== undefined) throw ctx.cancelReason;
    throw classifyUpstreamError(err, backend.id);
  } finally {
    abort.listen(undefined);
  }
  const chunks: Buffer[] = [];
  let bytes = 0;
  for await (const chunk of answer.body) {
    bytes += (chunk as Buffer).length;
    if (bytes > MAX_STORED_RESPONSE_BYTES) {
      answer.body.destroy();
      throw new GatewayError("upstream_error", `engine ${backend.id} sent more than a stored response holds`);
    }
    chunks.push(chunk as Buffer);
  }
  const body = Buffer.concat(chunks);
  const headers = { "x-request-id": ctx.requestId, "x-agent-serve-backend": backend.id };
  if (answer.statusCode >= 500) {
    throw new GatewayError("upstream_error", `engine ${backend.id} answered ${answer.statusCode}`);
  }
  if (answer.statusCode !== 200) {
    writeJson(res, answer.statusCode, engineErrorEnvelope(body, answer.statusCode), headers);
    return;
  }
  if (method === "DELETE") rt.responseOwners.forget(responseId);
  res.writeHead(200, { ...headers, "content-type": "application/json", "content-length": body.length });
  res.end(body);
}
