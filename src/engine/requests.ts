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
}

export type EngineMessagesRequest = GenerationRequest;

function optionalNumber(body: unknown, key: string): number | undefined {
  const value = (body as Record<string, unknown>)[key];
  return typeof value === "number" ? value : undefined;
}

/** The one string prompt of a completion request: batches, token ids, echo and logprobs are refused. */
function completionText(
  body: unknown,
  request: Extract<GenerateRequest, { endpoint: "completion" }>,
): string {
  const fields = body as Record<string, unknown>;
  if (request.prompts.length !== 1)
    throw badRequest(
      "a list of prompts is not supported by this engine: send one prompt per request",
      "prompt",
    );
  const [prompt] = request.prompts;
  if (typeof prompt !== "string")
    throw badRequest(
      "token-id prompts are not supported by this engine: send the prompt as a string",
      "prompt",
    );
  if (fields["echo"] === true) throw badRequest("echo is not supported by this engine", "echo");
  if (fields["logprobs"] !== undefined && fields["logprobs"] !== null)
    throw badRequest("logprobs are not supported by this engine", "logprobs");
  return prompt;
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
  // A completion prompt is tokenized whole, special tokens included, as vLLM's tokenizer does: the client writes
  // the entire prompt, so there is no turn to forge. Chat messages never are (src/engine/chat-prompt.ts).
  const prompt =
    request.endpoint === "chat"
      ? engine.chat.render(request.messages, request.tools)
      : engine.model.tokenize(completionText(body, request), true);
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
  };
}

/**
 * An Anthropic Messages request (POST /v1/messages, or `/count_tokens` when `countOnly`) on the chat path, read
 * by the simulator's converter (src/sim/messages-request.ts): system, text, tool_use and tool_result blocks become
 * chat turns, tools with input_schema become the function tools rendered into the prompt.
 */
export function parseEngineMessagesRequest(
  body: unknown,
  engine: LlamaEngine,
  servedModel: string,
  countOnly: boolean,
): EngineMessagesRequest {
  const request = parseMessagesRequest(body, countOnly);
  checkServedModel(request.model, servedModel);
  const prompt = engine.chat.render(request.messages, promptTools(request));
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
