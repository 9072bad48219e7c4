// The one place a request's answer is written to the client: an engine's answer (a whole JSON body, or the head
// of an event stream the API's relay then fills) and the gateway's own errors (OpenAI's envelope, Anthropic's on
// the Messages routes). Every answer carries the facts the turn record holds when it is written: the request id
// always, the placement's metadata once an engine was chosen (x-agent-serve-*), the tier an error got to.
import type { GatewayError } from "../core/errors.js";
import type { AnswerSink } from "./attempt.js";
import { metadataHeaderList, type AgentServeMetadata } from "./response-metadata.js";
import type { RequestContext } from "./request-context.js";

/** The head of an answered turn: the request id and the placement's metadata, as node's flat header list. */
export function answerHead(meta: AgentServeMetadata, requestId: string): string[] {
  return metadataHeaderList(meta, requestId);
}

/** A whole JSON answer of `status`, with its length, after the turn's `head` (which it extends). */
export function answerJson(res: AnswerSink, status: number, head: string[], body: Buffer): void {
  head.push("content-type", "application/json", "content-length", String(body.length));
  res.writeHead(status, head);
  res.end(body);
}

/** Opens a streamed answer: the turn's head, then what an event stream needs (no proxy buffering it). */
export function openEventStream(res: AnswerSink, head: string[]): void {
  head.push(
    "content-type",
    "text/event-stream; charset=utf-8",
    "cache-control",
    "no-cache",
    "x-accel-buffering",
    "no",
  );
  res.writeHead(200, head);
}

/** What an error answer reads of the turn record: its id, its route (the envelope) and the tier it reached. */
export type ErrorTurn = Pick<RequestContext, "requestId" | "path" | "tier">;

/**
 * The gateway's own error, in the envelope of the route's API, with its retry-after, the request id and the
 * tier the turn reached. `closing`: the connection ends after it (a body left unread), and the client is told.
 */
export function answerError(res: AnswerSink, turn: ErrorTurn, error: GatewayError, closing: boolean): void {
  const head = ["x-request-id", turn.requestId, "request-id", turn.requestId];
  for (const [name, value] of Object.entries(error.headers())) head.push(name, value);
  if (turn.tier !== undefined) head.push("x-agent-serve-tier", turn.tier);
  if (closing) head.push("connection", "close");
  const envelope = turn.path.startsWith("/v1/messages") ? error.toAnthropicJSON() : error.toJSON();
  answerJson(res, error.status, head, Buffer.from(JSON.stringify(envelope)));
}
