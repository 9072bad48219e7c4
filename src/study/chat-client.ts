// One chat completion as an agent sends it, timed: TTFT from the first content chunk, E2E to the end.
import type { Dispatcher } from "undici";

export interface ChatTurnRequest {
  /** Sent as X-Session-Id; undefined: the request has none (session-less placement). */
  sessionId: string | undefined;
  messages: unknown[];
  model?: string;
  tierHint?: string;
  maxTokens: number;
  stream: boolean;
  /** More request headers (a client's own session signal, e.g. x-claude-code-session-id). */
  headers?: Readonly<Record<string, string>>;
  /** More body fields (e.g. vLLM's ignore_eos for replies of exactly max_tokens). */
  extraBody?: Readonly<Record<string, unknown>>;
}

/** vLLM's ignore_eos: the engine writes exactly max_tokens, so a workload's reply lengths are what it planned. */
export const EXACT_LENGTH: Readonly<Record<string, unknown>> = { ignore_eos: true };

export interface ChatTurnResult {
  status: number;
  ok: boolean;
  error?: string;
  /** Wall-clock ms to the first chunk carrying content (streams only). */
  ttftMs: number | null;
  e2eMs: number;
  reply: string;
  backend: string | null;
  tier: string | null;
  affinityHit: boolean | null;
  reason: string | null;
  attempts: number | null;
  queueWaitMs: number | null;
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  /** The route receipt (x_agent_serve): null when the gateway sent none (an older gateway, a failed turn). */
  reusableTokens?: number | null;
  lostTokens?: number | null;
  lostCause?: string | null;
  /** The gateway's prediction of cachedTokens from the engine's KV events; null when it made none. */
  expectedCachedTokens?: number | null;
}

interface Meta {
  tier: string;
  backend_id: string;
  affinity_hit: boolean;
  reason: string;
  attempts: number;
  queue_wait_ms: number;
  reusable_tokens?: number;
  lost_tokens?: number;
  lost_cause?: string;
  expected_cached_tokens?: number;
}

interface Usage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
}

interface ParsedChunk {
  choices?: { delta?: { content?: string | null }; message?: { content?: string | null } }[];
  usage?: Usage | null;
  x_agent_serve?: Meta;
  error?: { message?: string };
}

function emptyResult(status: number, e2eMs: number, error: string): ChatTurnResult {
  return {
    status,
    ok: false,
    error,
    ttftMs: null,
    e2eMs,
    reply: "",
    backend: null,
    tier: null,
    affinityHit: null,
    reason: null,
    attempts: null,
    queueWaitMs: null,
    promptTokens: 0,
    cachedTokens: 0,
    completionTokens: 0,
    reusableTokens: null,
    lostTokens: null,
    lostCause: null,
    expectedCachedTokens: null,
  };
}

export async function sendChatTurn(
  pool: Dispatcher,
  request: ChatTurnRequest,
  nowMs: () => number,
): Promise<ChatTurnResult> {
  const started = nowMs();
  const headers: Record<string, string> = { ...request.headers, "content-type": "application/json" };
  if (request.sessionId !== undefined) headers["x-session-id"] = request.sessionId;
  if (request.tierHint !== undefined) headers["x-tier-hint"] = request.tierHint;
  const body = JSON.stringify({
    model: request.model ?? "auto",
    messages: request.messages,
    max_tokens: request.maxTokens,
    stream: request.stream,
    ...(request.stream ? { stream_options: { include_usage: true } } : {}),
    ...request.extraBody,
  });
  let status = 0;
  try {
    const response = await pool.request({ path: "/v1/chat/completions", method: "POST", headers, body });
    status = response.statusCode;
    if (!request.stream || status !== 200) {
      const text = await response.body.text();
      const e2eMs = nowMs() - started;
      const parsed = JSON.parse(text) as ParsedChunk;
      if (status !== 200) return emptyResult(status, e2eMs, parsed.error?.message ?? `status ${status}`);
      return resultFrom(status, parsed, parsed.choices?.[0]?.message?.content ?? "", null, e2eMs, undefined);
    }
    let ttftMs: number | null = null;
    let reply = "";
    let meta: ParsedChunk = {};
    let streamError: string | undefined;
    let pending = "";
    for await (const chunk of response.body) {
      pending += chunk.toString();
      let boundary = pending.indexOf("\n\n");
      while (boundary >= 0) {
        const event = pending.slice(0, boundary).trim();
        pending = pending.slice(boundary + 2);
        boundary = pending.indexOf("\n\n");
        if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
        const parsed = JSON.parse(event.slice(6)) as ParsedChunk;
        if (parsed.error) streamError = parsed.error.message ?? "stream error";
        const content = parsed.choices?.[0]?.delta?.content;
        if (content) {
          if (ttftMs === null) ttftMs = nowMs() - started;
          reply += content;
        }
        if (parsed.usage) meta = { ...meta, usage: parsed.usage };
        // The usage chunk repeats the metadata with the receipt: merged, the first chunk's fields kept.
        if (parsed.x_agent_serve)
          meta = { ...meta, x_agent_serve: { ...meta.x_agent_serve, ...parsed.x_agent_serve } };
      }
    }
    return resultFrom(status, meta, reply, ttftMs, nowMs() - started, streamError);
  } catch (err) {
    return emptyResult(status, nowMs() - started, err instanceof Error ? err.message : String(err));
  }
}

function resultFrom(
  status: number,
  parsed: ParsedChunk,
  reply: string,
  ttftMs: number | null,
  e2eMs: number,
  streamError: string | undefined,
): ChatTurnResult {
  const meta = parsed.x_agent_serve;
  const usage = parsed.usage ?? {};
  return {
    status,
    ok: streamError === undefined,
    ...(streamError === undefined ? {} : { error: streamError }),
    ttftMs,
    e2eMs,
    reply,
    backend: meta?.backend_id ?? null,
    tier: meta?.tier ?? null,
    affinityHit: meta?.affinity_hit ?? null,
    reason: meta?.reason ?? null,
    attempts: meta?.attempts ?? null,
    queueWaitMs: meta?.queue_wait_ms ?? null,
    promptTokens: usage.prompt_tokens ?? 0,
    cachedTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
    completionTokens: usage.completion_tokens ?? 0,
    reusableTokens: meta?.reusable_tokens ?? null,
    lostTokens: meta?.lost_tokens ?? null,
    lostCause: meta?.lost_cause ?? null,
    expectedCachedTokens: meta?.expected_cached_tokens ?? null,
  };
}
