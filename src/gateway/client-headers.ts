// Validates the gateway's own request headers: session id, tier hint and agent id.
import { GatewayError } from "../core/errors.js";
import type { DistinctHeaders } from "./client-auth.js";

export const MAX_SESSION_ID_BYTES = 256;
/** Printable ASCII, space excluded at the ends by trimming in HTTP parsing already. */
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

export interface ClientHeaders {
  sessionId: string | undefined;
  /** undefined and "auto" both mean: let the router decide. */
  tierHint: string | undefined;
  /** X-Agent-Id as sent; undefined when absent. */
  agentId: string | undefined;
}

/**
 * Node joins repeated custom headers into one value ("a, a"), which would make a new session or agent id of
 * two copies of one: the distinct values are read instead, and two of them are a 400.
 */
function single(headers: DistinctHeaders, name: string): string | undefined {
  const values = headers[name];
  if (values === undefined) return undefined;
  if (values.length > 1) {
    throw new GatewayError("invalid_header", `header ${name} must appear once`, { param: name });
  }
  return values[0];
}

function printable(name: string, value: string, maxBytes: number): string {
  if (value.length === 0 || value.length > maxBytes || !PRINTABLE_ASCII.test(value)) {
    throw new GatewayError(
      "invalid_header",
      `header ${name} must be 1-${maxBytes} printable ASCII characters`,
      { param: name },
    );
  }
  return value;
}

export function parseClientHeaders(headers: DistinctHeaders): ClientHeaders {
  const session = single(headers, "x-session-id");
  const hint = single(headers, "x-tier-hint");
  const agent = single(headers, "x-agent-id");
  return {
    sessionId: session === undefined ? undefined : printable("x-session-id", session, MAX_SESSION_ID_BYTES),
    tierHint: hint === undefined || hint === "" ? undefined : printable("x-tier-hint", hint, 64),
    agentId: agent === undefined ? undefined : printable("x-agent-id", agent, 128),
  };
}
