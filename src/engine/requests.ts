// Turns a chat, text completion or Anthropic Messages request into what the engine generates from: prompt tokens, length, sampling.
//
// Validation is the simulator's (vLLM's rules and messages); this adds what the llama.cpp engine does not serve
// and its context limit, worded as vLLM words it ("messages" for chat, "prompt" for completions).
import { badRequest, checkServedModel } from "../surface/errors.js";
import { parseMessagesRequest, promptTools } from "../surface/messages-request.js";
import { parseChatRequest, parseCompletionRequest, type GenerateRequest } from "../surface/request-parser.js";
import { ENGINE_DEFAULTS } from "./defaults.js";
import type { LlamaEngine, Sampling } from "./llama-engine.js";

export type Endpoint = "chat" | "completion";

/** What the engine generates from, whichever API asked. */
export interface GenerationRequest {
  prompt: number[];
  maxTokens: number;
  sampling: Sampling;
  /** vLLM's ignore_eos: decode past end-of-generation tokens, so the reply is exactly max_tokens. */
  ignoreEos: boolean;
  stream: boolean;
}

export interface EngineRequest extends GenerationRequest {
  endpoint: Endpoint;
  includeUsage: boolean;
  /** vLLM's return_token_ids: the answer carries its prompt's and its reply's token ids. */
  returnTokenIds: boolean;
}

export type EngineMessagesRequest = GenerationRequest;

function optionalNumber(body: unknown, key: string): number | undefined {
  const value = (body as Record<string, unknown>)[key];
  return typeof value === "number" ? value : undefined;
}

/**
 * The prompt tokens of a completion request: its one prompt, a string tokenized whole (special tokens included,
 * as vLLM's tokenizer does: the client writes the entire prompt, so there is no turn to forge) or token ids taken
 * as they are (what lets a client continue an answer from the very ids it was generated as). Batches, echo and
 * logprobs are refused.
 */
function completionPrompt(
  body: unknown,
  request: Extract<GenerateRequest, { endpoint: "completion" }>,
  engine: LlamaEngine,
): number[] {
  const fields = body as Record<string, unknown>;
  if (request.prompts.length !== 1)
    throw badRequest(
      "a list of prompts is not supported by this engine: send one prompt per request",
      "prompt",
    );
  if (fields["echo"] === true) throw badRequest("echo is not supported by this engine", "echo");
  if (fields["logprobs"] !== undefined && fields["logprobs"] !== null)
    throw badRequest("logprobs are not supported by this engine", "logprobs");
  const [prompt] = request.prompts;
  if (typeof prompt === "string") return engine.model.tokenize(prompt, true);
  // The request parser checked the ids against the simulator's vocabulary; this model's may be smaller, and
  // llama.cpp must never see an id outside it.
  const outside = prompt!.find((id) => id >= engine.vocabularySize);
  if (outside !== undefined) throw badRequest(`Token id ${outside} is out of vocabulary`, "prompt");
  return prompt!;
}

/** vLLM's return_token_ids, served on answers that are not streamed. */
function readReturnTokenIds(body: unknown, stream: boolean): boolean {
  const value = (body as Record<string, unknown>)["return_token_ids"];
  if (value === undefined || value === null || value === false) return false;
  if (value !== true)
    throw badRequest("return_token_ids: Input should be a valid boolean", "return_token_ids");
  if (stream)
    throw badRequest(
      "return_token_ids is served on answers that are not streamed only, by this engine",
      "return_token_ids",
    );
  return true;
}

/** vLLM's context checks: the prompt must leave room, and prompt + max_tokens must fit in a slot. */
function checkContext(prompt: readonly number[], maxTokens: number, where: string, limit: number): void {
  if (prompt.length + maxTokens > limit) {
    throw badRequest(
      `This model's maximum context length is ${limit} tokens. However, you requested ` +
        `${prompt.length + maxTokens} tokens (${prompt.length} in the ${where}, ${maxTokens} in the ` +
        `completion). Please reduce the length of the ${where} or completion.`,
    );
  }
}

function checkPrompt(prompt: readonly number[], where: string, limit: number): void {
  if (prompt.length >= limit) {
    throw badRequest(
      `This model's maximum context length is ${limit} tokens. However, your ${where} resulted in ` +
        `${prompt.length} tokens. Please reduce the length of the ${where}.`,
    );
  }
}

/** The sampling knobs both APIs share (Anthropic's Messages names them as chat does). */
function readSampling(body: unknown, seed: number | undefined): Sampling {
  const topP = optionalNumber(body, "top_p");
  const topK = optionalNumber(body, "top_k");
  return {
    temperature: optionalNumber(body, "temperature") ?? ENGINE_DEFAULTS.temperature,
    ...(topP === undefined ? {} : { topP }),
    ...(topK === undefined ? {} : { topK }),
    ...(seed === undefined ? {} : { seed }),
  };
}

export function parseEngineRequest(
  body: unknown,
  endpoint: Endpoint,
  engine: LlamaEngine,
  servedModel: string,
): EngineRequest {
  const request: GenerateRequest =
    endpoint === "chat" ? parseChatRequest(body) : parseCompletionRequest(body);
  checkServedModel(request.model, servedModel);
  if (request.n !== 1) throw badRequest("n > 1 is not supported by this engine", "n");
  const prompt =
    request.endpoint === "chat"
      ? engine.chat.render(request.messages, request.tools, {
          addGenerationPrompt: request.addGenerationPrompt,
          continueFinalMessage: request.continueFinalMessage,
        })
      : completionPrompt(body, request, engine);
  const where = endpoint === "chat" ? "messages" : "prompt";
  const limit = engine.shape.ctxSize;
  checkPrompt(prompt, where, limit);
  const defaultMaxTokens =
    endpoint === "chat" ? ENGINE_DEFAULTS.maxTokens : ENGINE_DEFAULTS.completionMaxTokens;
  const maxTokens = request.maxTokens ?? Math.min(defaultMaxTokens, limit - prompt.length);
  checkContext(prompt, maxTokens, where, limit);
  return {
    endpoint,
    prompt,
    maxTokens,
    sampling: readSampling(body, request.seed),
    ignoreEos: request.ignoreEos,
    stream: request.stream,
    includeUsage: request.includeUsage,
    returnTokenIds: readReturnTokenIds(body, request.stream),
  };
}

/**
 * An Anthropic Messages request (POST /v1/messages, or `/count_tokens` when `countOnly`) on the chat path, read
 * by the simulator's converter (src/sim/messages-request.ts): system, text, tool_use and tool_result blocks become
 * chat turns, tools with input_schema become the function tools rendered into the prompt. A trailing assistant
 * message is a prefill (Anthropic's rule): it is left open and the answer goes on from its text, as chat's
 * continue_final_message.
 */
export function parseEngineMessagesRequest(
  body: unknown,
  engine: LlamaEngine,
  servedModel: string,
  countOnly: boolean,
): EngineMessagesRequest {
  const request = parseMessagesRequest(body, countOnly);
  checkServedModel(request.model, servedModel);
  const prefilled = request.messages.at(-1)?.role === "assistant";
  const prompt = engine.chat.render(request.messages, promptTools(request), {
    addGenerationPrompt: !prefilled,
    continueFinalMessage: prefilled,
  });
  const limit = engine.shape.ctxSize;
  if (!countOnly) {
    checkPrompt(prompt, "messages", limit);
    checkContext(prompt, request.maxTokens, "messages", limit);
  }
  const seed = optionalNumber(body, "seed");
  return {
    prompt,
    maxTokens: request.maxTokens,
    sampling: readSampling(body, seed !== undefined && Number.isInteger(seed) ? seed : undefined),
    ignoreEos: request.ignoreEos,
    stream: request.stream,
  };
}
