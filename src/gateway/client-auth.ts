// Client API keys (stored as SHA-256 hashes) and the agent a request is charged to.
import { createHash } from "node:crypto";
import type { IncomingHttpHeaders } from "node:http";
import { GatewayError } from "../core/errors.js";

export interface ApiKeyEntry {
  agentId: string | undefined;
}

export function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/**
 * The agent a request is charged to: the API key's agent when the key names one, else X-Agent-Id, else
 * none. With keys configured, a request without a known key is refused (401). Looking up the key's hash
 * (not the key) means timing reveals nothing usable about valid keys.
 */
export function authenticate(
  headers: IncomingHttpHeaders,
  declaredAgentId: string | undefined,
  keys: ReadonlyMap<string, ApiKeyEntry>,
): { agentId: string | undefined; keyed: boolean } {
  if (keys.size === 0) return { agentId: declaredAgentId, keyed: false };
  const header = headers.authorization;
  const token = header?.startsWith("Bearer ") ? header.slice(7).trim() : undefined;
  if (token === undefined || token === "") {
    throw new GatewayError("unauthorized", "this gateway needs an API key: 'Authorization: Bearer <key>'");
  }
  const entry = keys.get(sha256Hex(token));
  if (entry === undefined) throw new GatewayError("unauthorized", "unknown API key");
  // A key's own agent is an authenticated identity; a declared X-Agent-Id is only what the client says.
  return entry.agentId !== undefined
    ? { agentId: entry.agentId, keyed: true }
    : { agentId: declaredAgentId, keyed: false };
}
