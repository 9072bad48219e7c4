// Which body fields limit how many tokens an answer may generate, per API, as vLLM reads them: the budget's clamp
// must lower the field the engine reads (a Responses request's `max_tokens` is no field of its API: vLLM ignores it).
import type { Endpoint } from "./completion-request.js";

/**
 * Chat takes either name. vLLM reads the newer max_completion_tokens first (`max_completion_tokens or
 * max_tokens`), so the estimate does too; a clamp of a request that set neither writes max_tokens, the name
 * every engine we front (llama.cpp's server too) reads.
 */
const CHAT_FIELDS: readonly string[] = ["max_completion_tokens", "max_tokens"];
const CHAT_DEFAULT_FIELD = "max_tokens";
const RESPONSES_FIELDS: readonly string[] = ["max_output_tokens"];
/** Completions, and Anthropic's Messages. */
const MAX_TOKENS_FIELDS: readonly string[] = ["max_tokens"];

/** The fields a client may set to limit the answer's tokens, in the order they are read. */
export function outputLimitFieldsOf(endpoint: Endpoint): readonly string[] {
  if (endpoint === "chat") return CHAT_FIELDS;
  if (endpoint === "responses") return RESPONSES_FIELDS;
  return MAX_TOKENS_FIELDS;
}

/**
 * Writes `limitTokens` into `body` (a copy the caller owns) where its API reads it: into every limit field the
 * client set, or the API's first field when it set none.
 */
export function writeOutputLimit(
  endpoint: Endpoint,
  body: Record<string, unknown>,
  limitTokens: number,
): void {
  const fields = outputLimitFieldsOf(endpoint);
  const used = fields.filter((field) => body[field] !== undefined && body[field] !== null);
  if (used.length === 0) used.push(endpoint === "chat" ? CHAT_DEFAULT_FIELD : fields[0]!);
  for (const field of used) body[field] = limitTokens;
}
