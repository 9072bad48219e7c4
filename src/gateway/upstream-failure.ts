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
  ) {
    super(code, message);
  }
}

const TIMEOUT_CODES = new Set(["UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT", "UND_ERR_CONNECT_TIMEOUT"]);

/** Why the gateway itself abandoned an attempt (the reason its AttemptAbort carries). */
export type AbandonReason =
  "first_byte_timeout" | "backend marked down" | "backend removed from config" | "backend left discovery";

/** Turns an undici/socket error of one attempt into an AttemptFailure (the caller checks client aborts first). */
export function classifyUpstreamError(
  err: unknown,
  backendId: string,
  abandoned?: AbandonReason,
): AttemptFailure {
  if (abandoned === "first_byte_timeout") {
    return new AttemptFailure(
      "upstream_timeout",
      `backend ${backendId} sent nothing within the first-byte timeout`,
      true,
    );
  }
  if (abandoned !== undefined) {
    // The health checker already knows; this attempt is not a new signal.
    return new AttemptFailure("upstream_error", `backend ${backendId}: ${abandoned}`, false);
  }
  const code = typeof err === "object" && err !== null && "code" in err ? String(err.code) : "";
  const detail = err instanceof Error ? err.message : String(err);
  if (TIMEOUT_CODES.has(code)) {
    return new AttemptFailure(
      "upstream_timeout",
      `backend ${backendId} timed out (${code}: ${detail})`,
      true,
    );
  }
  return new AttemptFailure(
    "upstream_error",
    `backend ${backendId} failed (${code || "error"}: ${detail})`,
    true,
  );
}
