// The project's one error family: stable codes, each mapped to an HTTP status and OpenAI error type here only.
//
// Every error the project throws on purpose is a GatewayError or a subclass of it (ConfigError, UsageError,
// AttemptFailure, ...), as undici's errors all derive from UndiciError with a stable UND_ERR_* code. A subclass
// adds the facts its catcher needs (a config's problems, an attempt's health signal); its code says what it is.

const CODES = {
  invalid_json: { status: 400, type: "invalid_request_error" },
  invalid_request: { status: 400, type: "invalid_request_error" },
  invalid_header: { status: 400, type: "invalid_request_error" },
  unauthorized: { status: 401, type: "authentication_error" },
  forbidden: { status: 403, type: "permission_error" },
  not_found: { status: 404, type: "not_found_error" },
  model_not_found: { status: 404, type: "not_found_error" },
  tier_not_found: { status: 404, type: "not_found_error" },
  session_not_found: { status: 404, type: "not_found_error" },
  backend_not_found: { status: 404, type: "not_found_error" },
  response_not_found: { status: 404, type: "not_found_error" },
  response_lost: { status: 404, type: "not_found_error" }, // its engine, which kept it in memory, is gone
  method_not_allowed: { status: 405, type: "invalid_request_error" },
  request_timeout: { status: 408, type: "invalid_request_error" },
  body_too_large: { status: 413, type: "invalid_request_error" },
  unsupported_media_type: { status: 415, type: "invalid_request_error" },
  header_too_large: { status: 431, type: "invalid_request_error" },
  budget_exceeded: { status: 429, type: "rate_limit_error" },
  too_many_agents: { status: 503, type: "service_unavailable_error" },
  no_healthy_backend: { status: 503, type: "service_unavailable_error" },
  queue_full: { status: 503, type: "service_unavailable_error" },
  queue_timeout: { status: 503, type: "service_unavailable_error" },
  shutting_down: { status: 503, type: "service_unavailable_error" },
  store_unavailable: { status: 503, type: "service_unavailable_error" }, // an admin read of a shared store failed
  upstream_error: { status: 502, type: "upstream_error" },
  upstream_timeout: { status: 504, type: "upstream_error" },
  internal_error: { status: 500, type: "internal_error" },
  not_implemented: { status: 501, type: "invalid_request_error" },
  // Codes that name a failure inside the gateway; each has its catcher, and the status is what a client would
  // see if one ever escaped (a reload through /admin reports a bad config as 400).
  client_closed: { status: 499, type: "invalid_request_error" }, // the client left; nothing is sent
  backend_unavailable: { status: 503, type: "service_unavailable_error" }, // a queued attempt's backend went
  invalid_config: { status: 400, type: "invalid_request_error" },
  usage_error: { status: 400, type: "invalid_request_error" }, // bad command-line usage (exit 2)
  engine_unavailable: { status: 503, type: "service_unavailable_error" }, // llama.cpp cannot load here
  engine_start_failed: { status: 503, type: "service_unavailable_error" }, // `start` could not launch an engine
  kv_events_invalid: { status: 502, type: "upstream_error" }, // an engine's KV-event payload is not vLLM's format
  kv_events_replay_failed: { status: 504, type: "upstream_error" }, // an engine's replay socket did not answer
  kv_shared_pending_invalid: { status: 500, type: "internal_error" }, // another replica's pending-send message
} as const satisfies Record<string, { status: number; type: string }>;

export type ErrorCode = keyof typeof CODES;

export interface GatewayErrorOptions {
  /** The request field at fault, as OpenAI's `param`. */
  param?: string;
  /** Sets `Retry-After` (whole seconds, rounded up). */
  retryAfterSeconds?: number;
  /** Overrides the code's status: relaying an engine's own 4xx keeps the engine's status. */
  status?: number;
  cause?: unknown;
}

export class GatewayError extends Error {
  override name = "GatewayError";
  readonly status: number;
  readonly type: string;
  readonly param: string | null;
  readonly retryAfterSeconds: number | undefined;

  constructor(
    readonly code: ErrorCode,
    message: string,
    options: GatewayErrorOptions = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.status = options.status ?? CODES[code].status;
    this.type = CODES[code].type;
    this.param = options.param ?? null;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }

  /** The OpenAI error envelope. */
  toJSON(): { error: { message: string; type: string; param: string | null; code: string } } {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }

  /**
   * Anthropic's envelope, on the Messages routes: its error type from the status (the code stays in the
   * message's reach through the OpenAI envelope's routes only; Anthropic clients read type and message).
   */
  toAnthropicJSON(): { type: "error"; error: { type: string; message: string } } {
    return { type: "error", error: { type: anthropicType(this.status), message: this.message } };
  }

  /** Response headers the error carries besides the body. */
  headers(): Record<string, string> {
    return this.retryAfterSeconds === undefined
      ? {}
      : { "retry-after": String(Math.max(1, Math.ceil(this.retryAfterSeconds))) };
  }
}

/** Anything thrown becomes a GatewayError; unknown errors are a 500 that never leaks internals. */
export function toGatewayError(err: unknown): GatewayError {
  if (err instanceof GatewayError) return err;
  return new GatewayError("internal_error", "internal gateway error", { cause: err });
}

/** Anthropic's error type for an HTTP status (its API's own list). */
export function anthropicType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 404) return "not_found_error";
  if (status === 413) return "request_too_large";
  if (status === 429) return "rate_limit_error";
  if (status === 503 || status === 529) return "overloaded_error";
  return status >= 500 ? "api_error" : "invalid_request_error";
}
