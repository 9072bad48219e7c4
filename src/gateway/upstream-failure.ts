// Classifies what went wrong talking to an engine: retryable or not, a health signal or not, 502 or 504.
import { GatewayError } from "../core/errors.js";

/** An attempt failed before any byte reached the client: the request may go to the next backend. */
export class AttemptFailure extends GatewayError {
  override name = "AttemptFailure";
  constructor(
    code: "upstream_error" | "upstream_timeout",
    message: string,
    /** Whether the failure says something about the engine's health (feeds the passive health signal). */
    readonly healthSignal: boolean,
    /** The engine's own Retry-After (seconds) on a 503, passed on when every attempt failed. */
    engineRetryAfterSeconds?: number,
    /** The library error behind it, for the log (never shown to clients). */
    options: { cause?: unknown } = {},
  ) {
    super(code, message, {
      ...options,
      ...(engineRetryAfterSeconds === undefined ? {} : { retryAfterSeconds: engineRetryAfterSeconds }),
    });
  }
}

/** Errors of a connection closed under a request before any answer: what a stale kept-alive one gives. */
const STALE_CODES = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET", "ECONNABORTED"]);

export function isStaleConnectionError(err: unknown): boolean {
  const code = typeof err === "object" && err !== null && "code" in err ? String(err.code) : "";
  return STALE_CODES.has(code);
}

/** A Retry-After header in seconds (delta-seconds or an HTTP date), capped at an hour; else undefined. */
export function retryAfterOf(value: string | string[] | undefined, nowMs = Date.now()): number | undefined {
  if (typeof value !== "string") return undefined;
  const trimmed = value.trim();
  let seconds: number;
  if (/^\d+$/.test(trimmed)) seconds = Number(trimmed);
  else {
    const at = Date.parse(trimmed);
    if (Number.isNaN(at)) return undefined;
    seconds = Math.ceil((at - nowMs) / 1000);
  }
  return Math.min(3600, Math.max(1, seconds));
}

const TIMEOUT_CODES = new Set(["UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT", "UND_ERR_CONNECT_TIMEOUT"]);

/** Why the gateway itself abandoned an attempt (the reason its AttemptAbort carries). */
export type AbandonReason =
  | "first_byte_timeout"
  | "stream_headers_timeout"
  | "stream_stall"
  | "backend marked down"
  | "backend removed from config"
  | "backend left discovery";

/**
 * Turns an undici/socket error of one attempt into an AttemptFailure (the caller checks client aborts first).
 * `midAnswer`: part of the answer had reached the client, and the words say so.
 */
export function classifyUpstreamError(
  err: unknown,
  backendId: string,
  abandoned?: AbandonReason,
  midAnswer = false,
): AttemptFailure {
  if (abandoned === "stream_stall") {
    return new AttemptFailure(
      "upstream_timeout",
      `backend ${backendId} stalled mid-answer: no data within upstream.stream_stall_seconds`,
      true,
    );
  }
  if (abandoned === "first_byte_timeout") {
    return new AttemptFailure(
      "upstream_timeout",
      `backend ${backendId} sent nothing within the first-byte timeout`,
      true,
    );
  }
  if (abandoned === "stream_headers_timeout") {
    return new AttemptFailure(
      "upstream_timeout",
      `backend ${backendId} sent no response headers within the stream headers timeout`,
      true,
    );
  }
  const during = midAnswer ? ", mid-answer" : "";
  if (abandoned !== undefined) {
    // The health checker already knows; this attempt is not a new signal.
    return new AttemptFailure("upstream_error", `backend ${backendId}: ${abandoned}${during}`, false);
  }
  const code = typeof err === "object" && err !== null && "code" in err ? String(err.code) : "";
  // Clients read the gateway's own words; the library's code and text go to the log (the cause).
  const cause = { cause: err };
  if (TIMEOUT_CODES.has(code)) {
    const what =
      code === "UND_ERR_CONNECT_TIMEOUT" ? "did not accept a connection in time" : "did not answer in time";
    return new AttemptFailure(
      "upstream_timeout",
      `backend ${backendId} ${what}${during}`,
      true,
      undefined,
      cause,
    );
  }
  const words = (midAnswer ? MID_ANSWER_WORDS[code] : undefined) ?? FAILURE_WORDS[code] ?? "failed";
  return new AttemptFailure(
    "upstream_error",
    `backend ${backendId} ${words}${midAnswer && MID_ANSWER_WORDS[code] === undefined ? during : ""}`,
    true,
    undefined,
    cause,
  );
}

/** What a socket error means once part of the answer had reached the client. */
const MID_ANSWER_WORDS: Record<string, string> = {
  ECONNRESET: "closed the connection mid-answer",
  EPIPE: "closed the connection mid-answer",
  UND_ERR_SOCKET: "closed the connection mid-answer",
};

/** What a socket or client error means, in the gateway's words. */
const FAILURE_WORDS: Record<string, string> = {
  ECONNREFUSED: "refused the connection",
  ECONNRESET: "closed the connection before answering",
  EPIPE: "closed the connection before answering",
  UND_ERR_SOCKET: "closed the connection before answering",
  ENOTFOUND: "has a host name that does not resolve",
  EHOSTUNREACH: "cannot be reached",
  ENETUNREACH: "cannot be reached",
  UND_ERR_DESTROYED: "could not be reached (its connection pool was closed)",
  UND_ERR_CLOSED: "could not be reached (its connection pool was closed)",
  UND_ERR_RES_CONTENT_LENGTH_MISMATCH: "sent an answer whose length did not match its Content-Length",
  HPE_INVALID_CONSTANT: "sent a malformed HTTP answer",
};
