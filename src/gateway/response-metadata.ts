// The x_agent_serve metadata: what the gateway did for a request, in bodies, SSE and response headers.
import type { SelectionReason } from "../affinity/decide.js";
import type { TierSource } from "../routing/tier-router.js";
import type { TokenUsage } from "./usage.js";

export interface AgentServeMetadata {
  session_id: string | null;
  /** Which of affinity.session_keys named the session (`header:x-claude-code-session-id`, ...). */
  session_source: string | null;
  tier: string;
  /** Why this tier: the hint, the model, a rule, or the classifier. */
  tier_source: TierSource;
  backend_id: string;
  affinity_hit: boolean;
  reason: SelectionReason;
  queue_wait_ms: number;
  attempts: number;
  /** What the gateway changed in the request for the engine (adaptation); undefined when nothing. */
  adapted: readonly string[] | undefined;
  /**
   * The route receipt (src/receipts), on answers whose usage the gateway read before sending them. Both optional
   * fields are always present (maybe undefined): every metadata object has one shape, which keeps the per-answer
   * code that reads it monomorphic (a spread adding a field made it several times slower).
   */
  receipt: ReceiptFields | undefined;
  /** Set when the answer was continued on this engine after another broke mid-answer (src/gateway/continuation). */
  migrated: MigrationFields | undefined;
}

/** A continued answer, as the client sees it (`x_agent_serve.migrated`). */
export interface MigrationFields {
  /** The engines that broke, in order. */
  from: string[];
  /** Why the last of them broke, in the gateway's words. */
  cause: string;
  /** A tool call cut halfway: `restarted` (regenerated, only what extends the part relayed sent on), else `none`. */
  tool_call: "restarted" | "none";
}

/** A receipt as the client sees it. */
export interface ReceiptFields {
  reusable_tokens: number;
  cached_tokens: number;
  lost_tokens: number;
  lost_cause: string;
  /** What placement expected the engine to hold by its KV events; absent when it publishes none. */
  expected_cached_tokens?: number | undefined;
}

/**
 * The request id and every field as an `X-Agent-Serve-*` header (the session id only when there is one), as
 * node's flat `[name, value, name, value, ...]` list: writeHead takes it as it is, where an object of headers
 * (and the spreads that merged it with the others) cost microseconds per answer.
 */
export function metadataHeaderList(meta: AgentServeMetadata, requestId: string): string[] {
  const list = [
    "x-request-id",
    requestId,
    // Anthropic's SDKs read this one for err.requestID / response ids.
    "request-id",
    requestId,
    "x-agent-serve-tier",
    meta.tier,
    "x-agent-serve-tier-source",
    meta.tier_source,
    "x-agent-serve-backend",
    meta.backend_id,
    "x-agent-serve-affinity-hit",
    meta.affinity_hit ? "true" : "false",
    "x-agent-serve-reason",
    meta.reason,
    "x-agent-serve-queue-wait-ms",
    String(meta.queue_wait_ms),
    "x-agent-serve-attempts",
    String(meta.attempts),
  ];
  // The session id was validated as printable ASCII, so it is a safe header value as it is.
  if (meta.session_id !== null) list.push("x-agent-serve-session-id", meta.session_id);
  if (meta.session_source !== null) list.push("x-agent-serve-session-source", meta.session_source);
  if (meta.adapted !== undefined) list.push("x-agent-serve-adapted", meta.adapted.join(","));
  const receipt = meta.receipt;
  if (receipt !== undefined) {
    list.push(
      "x-agent-serve-reusable-tokens",
      String(receipt.reusable_tokens),
      "x-agent-serve-cached-tokens",
      String(receipt.cached_tokens),
      "x-agent-serve-lost-tokens",
      String(receipt.lost_tokens),
      "x-agent-serve-lost-cause",
      receipt.lost_cause,
    );
    if (receipt.expected_cached_tokens !== undefined)
      list.push("x-agent-serve-expected-cached-tokens", String(receipt.expected_cached_tokens));
  }
  return list;
}

const json = JSON.stringify;

/**
 * The bytes `,"x_agent_serve":{...}` that splice the metadata into a JSON object. Written out field by field
 * (same order as the interface): a third cheaper than JSON.stringify of the object, on every answer.
 */
export function metadataMember(meta: AgentServeMetadata): Buffer {
  const session = meta.session_id === null ? "null" : json(meta.session_id);
  const source = meta.session_source === null ? "null" : json(meta.session_source);
  return Buffer.from(
    `,"x_agent_serve":{"session_id":${session},"session_source":${source},"tier":${json(meta.tier)},"tier_source":${json(meta.tier_source)},` +
      `"backend_id":${json(meta.backend_id)},"affinity_hit":${meta.affinity_hit},"reason":${json(meta.reason)},` +
      `"queue_wait_ms":${meta.queue_wait_ms},"attempts":${meta.attempts}` +
      (meta.adapted === undefined ? "" : `,"adapted":${json(meta.adapted)}`) +
      (meta.migrated === undefined ? "" : `,"migrated":${json(meta.migrated)}`) +
      (meta.receipt === undefined ? "}" : `,${receiptMembers(meta.receipt)}}`),
  );
}

/**
 * A metadata member (from metadataMember) with the receipt's fields added before its closing brace: the receipt
 * of a stream, known only once the engine's usage went by. The member as it is without a receipt.
 */
export function withReceipt(
  member: Buffer,
  usage: TokenUsage | undefined,
  receipt: ((usage: TokenUsage, responseId?: string) => ReceiptFields | undefined) | undefined,
  responseId?: string,
): Buffer {
  const fields = usage === undefined ? undefined : receipt?.(usage, responseId);
  if (fields === undefined) return member;
  return Buffer.concat([member.subarray(0, member.length - 1), Buffer.from(`,${receiptMembers(fields)}}`)]);
}

/** `"reusable_tokens":n,...` (the receipt's members, without braces). */
export function receiptMembers(receipt: ReceiptFields): string {
  return (
    `"reusable_tokens":${receipt.reusable_tokens},"cached_tokens":${receipt.cached_tokens},` +
    `"lost_tokens":${receipt.lost_tokens},"lost_cause":${json(receipt.lost_cause)}` +
    (receipt.expected_cached_tokens === undefined
      ? ""
      : `,"expected_cached_tokens":${receipt.expected_cached_tokens}`)
  );
}

/**
 * Adds `member` (from metadataMember) as the last member of a JSON object, without parsing and re-serialising
 * the (possibly large) body. Returns undefined when the body is not a non-empty JSON object.
 */
export function spliceMemberIntoJson(body: Buffer, member: Buffer): Buffer | undefined {
  let end = body.length - 1;
  while (end >= 0 && isSpace(body[end]!)) end--;
  if (end < 1 || body[end] !== 0x7d /* } */) return undefined;
  let before = end - 1;
  while (before >= 0 && isSpace(body[before]!)) before--;
  let start = 0;
  while (start < body.length && isSpace(body[start]!)) start++;
  if (body[start] !== 0x7b /* { */ || before <= start) return undefined; // `{}` or not an object
  return Buffer.concat([body.subarray(0, end), member, body.subarray(end)]);
}

function isSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}
