// Validates the gateway's own request headers: tier hint, agent id and priority (the session: session-identity.ts).
import { GatewayError } from "../core/errors.js";
import type { DistinctHeaders } from "./client-auth.js";

export const MAX_SESSION_ID_BYTES = 256;
/** Printable ASCII, space excluded at the ends by trimming in HTTP parsing already. */
const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

export interface ClientHeaders {
  /** undefined and "auto" both mean: let the router decide. */
  tierHint: string | undefined;
  /** X-Agent-Id as sent; undefined when absent. */
  agentId: string | undefined;
  /** X-Priority as sent (an integer, clamped later per API key); undefined when absent. */
  priority: number | undefined;
}

/** X-Priority: a small integer (its band; the scheduler clamps it to what the key allows). */
function parsePriority(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^-?[0-9]{1,3}$/.test(value.trim())) {
    throw new GatewayError("invalid_header", "header x-priority must be a small integer (a priority band)", {
      param: "x-priority",
    });
  }
  return Number(value.trim());
}

/**
 * Node joins repeated custom headers into one value ("a, a"), which would make a new session or agent id of
 * two copies of one: the distinct values are read instead, and two of them are a 400.
 */
export function single(headers: DistinctHeaders, name: string): string | undefined {
  const values = headers[name];
  if (values === undefined) return undefined;
  if (values.length > 1) {
    throw new GatewayError("invalid_header", `header ${name} must appear once`, { param: name });
  }
  return values[0];
}

/** A header's value (or, with code invalid_request, a body field's) checked as 1-maxBytes printable ASCII. */
export function printable(
  name: string,
  value: string,
  maxBytes: number,
  code: "invalid_header" | "invalid_request" = "invalid_header",
): string {
  if (value.length === 0 || value.length > maxBytes || !PRINTABLE_ASCII.test(value)) {
    const what = code === "invalid_header" ? `header ${name}` : `'${name}'`;
    throw new GatewayError(code, `${what} must be 1-${maxBytes} printable ASCII characters`, { param: name });
  }
  return value;
}

export function parseClientHeaders(headers: DistinctHeaders): ClientHeaders {
  const hint = single(headers, "x-tier-hint");
  const agent = single(headers, "x-agent-id");
  return {
    tierHint: hint === undefined || hint === "" ? undefined : printable("x-tier-hint", hint, 64),
    agentId: agent === undefined ? undefined : printable("x-agent-id", agent, 128),
    priority: parsePriority(single(headers, "x-priority")),
  };
}
