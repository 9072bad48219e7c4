// Relays an engine's own 4xx error in the OpenAI envelope, whichever of vLLM's error shapes it used.

export interface ErrorEnvelope {
  error: { message: string; type: string; param: string | null; code: string | number | null };
}

function field(source: Record<string, unknown>, key: string): unknown {
  return source[key];
}

/** vLLM answers `{"object":"error","message",...}` (older) or `{"error":{...}}` (newer); both become the latter. */
export function engineErrorEnvelope(body: Buffer, status: number): ErrorEnvelope {
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
  const type = source && typeof source["type"] === "string" ? source["type"] : "invalid_request_error";
  const param = source && typeof source["param"] === "string" ? source["param"] : null;
  const code =
    source && (typeof source["code"] === "string" || typeof source["code"] === "number")
      ? source["code"]
      : status;
  return { error: { message, type, param, code } };
}
