// The x_agent_serve metadata: what the gateway did for a request, in bodies, SSE and response headers.
import type { SelectionReason } from "../affinity/scheduler.js";

export interface AgentServeMetadata {
  session_id: string | null;
  tier: string;
  backend_id: string;
  affinity_hit: boolean;
  reason: SelectionReason;
  queue_wait_ms: number;
  attempts: number;
}

export function metadataHeaders(meta: AgentServeMetadata): Record<string, string> {
  return {
    "x-agent-serve-tier": meta.tier,
    "x-agent-serve-backend": meta.backend_id,
    "x-agent-serve-affinity-hit": meta.affinity_hit ? "true" : "false",
  };
}

/**
 * Adds `"x_agent_serve": {...}` as the last member of an engine's JSON object body, without parsing and
 * re-serialising the (possibly large) body. Returns undefined when the body is not a non-empty JSON object.
 */
export function spliceMetadataIntoJson(body: Buffer, meta: AgentServeMetadata): Buffer | undefined {
  let end = body.length - 1;
  while (end >= 0 && isSpace(body[end]!)) end--;
  if (end < 1 || body[end] !== 0x7d /* } */) return undefined;
  let before = end - 1;
  while (before >= 0 && isSpace(body[before]!)) before--;
  let start = 0;
  while (start < body.length && isSpace(body[start]!)) start++;
  if (body[start] !== 0x7b /* { */ || before <= start) return undefined; // `{}` or not an object
  const member = Buffer.from(`,"x_agent_serve":${JSON.stringify(meta)}`);
  return Buffer.concat([body.subarray(0, end), member, body.subarray(end)]);
}

function isSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}
