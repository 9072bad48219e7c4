// Relays an engine's own 4xx error in the client's API's envelope, whichever of vLLM's error shapes it used.
import { anthropicType } from "../core/errors.js";

export interface ErrorEnvelope {
  error: { message: string; type: string; param: string | null; code: string | number | null };
}

function field(source: Record<string, unknown>, key: string): unknown {
  return source[key];
}

interface EngineError {
  message: string;
  /** As the engine named it; undefined when it named none. */
  type: string | undefined;
  param: string | null;
  code: string | number | null;
}

/** vLLM answers `{"object":"error","message",...}` (older) or `{"error":{...}}` (newer, and Anthropic's). */
function parseEngineError(body: Buffer, status: number): EngineError {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    parsed = undefined;
  }
  let source: Record<string, unknown> | undefined;
  if (typeof parsed === "object" && parsed !== null) {
    const inner = field(parsed as Record<string, unknown>, "error");
    source =
      typeof inner === "object" && inner !== null
        ? (inner as Record<string, unknown>)
        : (parsed as Record<string, unknown>);
  }
  const message =
    source && typeof source["message"] === "string" ? source["message"] : `engine answered ${status}`;
  const type = source && typeof source["type"] === "string" ? source["type"] : undefined;
  const param = source && typeof source["param"] === "string" ? source["param"] : null;
  const code =
    source && (typeof source["code"] === "string" || typeof source["code"] === "number")
      ? source["code"]
      : status;
  return { message, type, param, code };
}

/** Both of vLLM's shapes become the newer OpenAI envelope. */
export function engineErrorEnvelope(body: Buffer, status: number): ErrorEnvelope {
  const { message, type, param, code } = parseEngineError(body, status);
  return { error: { message, type: type ?? "invalid_request_error", param, code } };
}

export interface AnthropicErrorEnvelope {
  type: "error";
  error: { type: string; message: string };
}

/** Anthropic's error types: an engine's type outside this list (an OpenAI one) is replaced by the status's. */
const ANTHROPIC_TYPES = new Set([
  "invalid_request_error",
  "authentication_error",
  "permission_error",
  "not_found_error",
  "request_too_large",
  "rate_limit_error",
  "api_error",
  "overloaded_error",
]);

/**
 * The same error for a /v1/messages client: Anthropic's envelope, which its SDKs parse (an OpenAI envelope
 * there surfaces as an unreadable error). The engine may have answered in either shape.
 */
export function engineErrorAnthropic(body: Buffer, status: number): AnthropicErrorEnvelope {
  const { message, type } = parseEngineError(body, status);
  const named = type !== undefined && ANTHROPIC_TYPES.has(type) ? type : anthropicType(status);
  return { type: "error", error: { type: named, message } };
}

/** The envelope for the API the client called (by its path). */
export function engineErrorBody(path: string, body: Buffer, status: number): Buffer {
  const envelope = path.startsWith("/v1/messages")
    ? engineErrorAnthropic(body, status)
    : engineErrorEnvelope(body, status);
  return Buffer.from(JSON.stringify(envelope));
}
