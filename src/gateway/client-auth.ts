// Client API keys (stored as SHA-256 hashes) and the agent a request is charged to.
import { createHash } from "node:crypto";
import { GatewayError } from "../core/errors.js";
import { single } from "./client-headers.js";

export interface ApiKeyEntry {
  agentId: string | undefined;
  /** The highest X-Priority band the key may ask for (server.api_keys[].max_priority). */
  maxPriority?: number | undefined;
}

/** Every value of each request header, as node's req.headersDistinct gives them (duplicates kept). */
export type DistinctHeaders = NodeJS.Dict<string[]>;

export function sha256Hex(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/**
 * With keys configured, the request's key entry (401 without a known key, 400 for two Authorization
 * headers); undefined when the gateway has no keys. It runs before anything else of a /v1 request looks at
 * the request. Looking up the key's hash (not the key) means timing reveals nothing usable about valid keys.
 */
function bearerToken(headers: DistinctHeaders): string | undefined {
  const header = single(headers, "authorization");
  return header?.startsWith("Bearer ") ? header.slice(7).trim() : undefined;
}

export function requireApiKey(
  headers: DistinctHeaders,
  keys: ReadonlyMap<string, ApiKeyEntry>,
): ApiKeyEntry | undefined {
  if (keys.size === 0) return undefined;
  const token = bearerToken(headers) ?? single(headers, "x-api-key")?.trim();
  if (token === undefined || token === "") {
    throw new GatewayError(
      "unauthorized",
      "this gateway needs an API key: 'Authorization: Bearer <key>' (or 'x-api-key: <key>', as Anthropic clients send it)",
    );
  }
  const entry = keys.get(sha256Hex(token));
  if (entry === undefined) throw new GatewayError("unauthorized", "unknown API key");
  return entry;
}

/**
 * The agent a request is charged to: the API key's agent when the key names one (an authenticated
 * identity, `keyed`), else X-Agent-Id (only what the client says), else none.
 */
export function chargedAgent(
  key: ApiKeyEntry | undefined,
  declaredAgentId: string | undefined,
): { agentId: string | undefined; keyed: boolean } {
  return key?.agentId !== undefined
    ? { agentId: key.agentId, keyed: true }
    : { agentId: declaredAgentId, keyed: false };
}
