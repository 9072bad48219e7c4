// Which streams can be continued faithfully on another engine: the request's own fields decide (n > 1, guided
// decoding, logprobs, token ids, a Responses conversation kept on one engine), and so does the config
// (upstream.stream_continuation).
import type { Endpoint } from "../completion-request.js";
import { responsesBlocker } from "./responses-as-chat.js";

export interface ContinuationSettings {
  readonly enabled: boolean;
  /** Continuations of one answer, at most. */
  readonly maxContinuations: number;
  /** Tiers whose streams are never continued. */
  readonly exceptTiers: ReadonlySet<string>;
}

/** Fields whose answer a continuation cannot reproduce: constrained or scored generation. */
const GUIDED = ["guided_json", "guided_regex", "guided_choice", "guided_grammar", "structured_outputs"];
const SCORED = ["logprobs", "top_logprobs", "prompt_logprobs"];

/** Why this request's stream cannot be continued on another engine, or undefined when it can. */
export function continuationBlocker(
  endpoint: Endpoint,
  body: Record<string, unknown>,
  tier: string,
  settings: ContinuationSettings,
): string | undefined {
  if (!settings.enabled) return "upstream.stream_continuation.enabled is false";
  if (settings.exceptTiers.has(tier)) return `tier '${tier}' is in upstream.stream_continuation.except_tiers`;
  // The ids a continued answer reports are the continuing engine's tokenisation of the text so far plus its own
  // reply, not the ids the first engine generated: a client that asked for ids (to train on them, say) would
  // read ids that do not match the text it was sent.
  if (body["return_token_ids"] === true) return "token ids were asked for (return_token_ids)";
  if (endpoint === "responses") return responsesBlocker(body);
  if (isSet(body["n"], 1) || isSet(body["best_of"], 1)) return "more than one choice (n > 1)";
  for (const field of SCORED)
    if (isSet(body[field], false) && body[field] !== 0) return `${field} was asked for`;
  if (body["echo"] === true) return "echo was asked for";
  for (const field of GUIDED) if (isSet(body[field], undefined)) return `guided decoding (${field})`;
  const format = body["response_format"];
  if (typeof format === "object" && format !== null && (format as { type?: unknown }).type !== "text")
    return "guided decoding (response_format)";
  if (endpoint === "completions" && !isOnePromptText(body["prompt"])) return "the prompt is not one string";
  return undefined;
}

/** Present, not null, and not the given default. */
function isSet(value: unknown, byDefault: unknown): boolean {
  return value !== undefined && value !== null && value !== byDefault;
}

function isOnePromptText(prompt: unknown): boolean {
  return (
    typeof prompt === "string" ||
    (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === "string")
  );
}
