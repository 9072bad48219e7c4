// Turns a chat or text completion request into what the engine generates from: prompt tokens, length, sampling.
//
// Validation is the simulator's (vLLM's rules and messages); this adds what the llama.cpp engine does not serve
// and its context limit, worded as vLLM words it ("messages" for chat, "prompt" for completions).
import { badRequest, SimRequestError } from "../sim/errors.js";
import { parseChatRequest, parseCompletionRequest, type GenerateRequest } from "../sim/request-parser.js";
import { ENGINE_DEFAULTS } from "./defaults.js";
import type { LlamaEngine, Sampling } from "./llama-engine.js";

export type Endpoint = "chat" | "completion";

export interface EngineRequest {
  endpoint: Endpoint;
  prompt: number[];
  maxTokens: number;
  sampling: Sampling;
  stream: boolean;
  includeUsage: boolean;
}

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

export function parseEngineRequest(
  body: unknown,
  endpoint: Endpoint,
  engine: LlamaEngine,
  servedModel: string,
): EngineRequest {
  const request: GenerateRequest =
    endpoint === "chat" ? parseChatRequest(body) : parseCompletionRequest(body);
  if (request.model !== undefined && request.model !== servedModel) {
    throw new SimRequestError(
      `The model \`${request.model}\` does not exist.`,
      404,
      "NotFoundError",
      "model",
    );
  }
  if (request.n !== 1) throw badRequest("n > 1 is not supported by this engine", "n");
  // A completion prompt is tokenized whole, special tokens included, as vLLM's tokenizer does: the client writes
  // the entire prompt, so there is no turn to forge. Chat messages never are (src/engine/chat-prompt.ts).
  const prompt =
    request.endpoint === "chat"
      ? engine.chat.render(request.messages, request.tools)
      : engine.model.tokenize(completionText(body, request), true);
  const where = endpoint === "chat" ? "messages" : "prompt";
  const limit = engine.shape.ctxSize;
  if (prompt.length >= limit) {
    throw badRequest(
      `This model's maximum context length is ${limit} tokens. However, your ${where} resulted in ` +
        `${prompt.length} tokens. Please reduce the length of the ${where}.`,
    );
  }
  const defaultMaxTokens =
    endpoint === "chat" ? ENGINE_DEFAULTS.maxTokens : ENGINE_DEFAULTS.completionMaxTokens;
  const maxTokens = request.maxTokens ?? Math.min(defaultMaxTokens, limit - prompt.length);
  if (prompt.length + maxTokens > limit) {
    throw badRequest(
      `This model's maximum context length is ${limit} tokens. However, you requested ` +
        `${prompt.length + maxTokens} tokens (${prompt.length} in the ${where}, ${maxTokens} in the ` +
        `completion). Please reduce the length of the ${where} or completion.`,
    );
  }
  const topP = optionalNumber(body, "top_p");
  const topK = optionalNumber(body, "top_k");
  return {
    endpoint,
    prompt,
    maxTokens,
    sampling: {
      temperature: optionalNumber(body, "temperature") ?? ENGINE_DEFAULTS.temperature,
      ...(topP === undefined ? {} : { topP }),
      ...(topK === undefined ? {} : { topK }),
      ...(request.seed === undefined ? {} : { seed: request.seed }),
    },
    stream: request.stream,
    includeUsage: request.includeUsage,
  };
}
