// The session id an engine is told of: vLLM reads X-Session-ID (or the body's session_id) and puts it on the
// BlockStored events of the request, so the gateway's KV-event index can tell which session's blocks an engine
// holds even when it cannot render the prompt's tokens (a real model's tokenizer; docs/kv-events.md).

/** The engine's request headers, with X-Session-ID when the gateway placed the request as a session. */
export function withEngineSessionHeader(
  headers: Record<string, string>,
  sessionId: string | undefined,
): Record<string, string> {
  // The id passed session-identity.ts's check (1-256 printable ASCII characters): a valid header value.
  return sessionId === undefined ? headers : { ...headers, "x-session-id": sessionId };
}
