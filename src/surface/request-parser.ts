// Validates OpenAI-style request bodies the way vLLM's server does, into typed generate requests.
//
// Fields vLLM accepts but the simulator has no use for (temperature, top_p, stop, logprobs, ...) are
// type-checked where vLLM would reject a wrong type, then ignored.
import type { ChatMessage, ChatToolCall } from "./chat-messages.js";
import { badRequest } from "./errors.js";
import { parseOutputFormat, type OutputFormat } from "./output-format.js";
import { parseChatTools, parseToolChoice, type ToolChoice, type ToolFunction } from "./tool-requests.js";
import { VOCAB_SIZE } from "./vocab.js";

/** Most choices (prompts x n) one request may ask for: generous for agents, bounded for the simulator. */
const MAX_CHOICES = 64;

export type PromptInput = string | number[];

interface CommonRequest {
  model: string | undefined;
  maxTokens: number | undefined;
  n: number;
  stream: boolean;
  includeUsage: boolean;
  seed: number | undefined;
  cacheSalt: string | undefined;
  /** vLLM's sampling extension: keep generating past end-of-turn, so the reply is exactly max_tokens. */
  ignoreEos: boolean;
}

export interface ChatRequest extends CommonRequest {
  endpoint: "chat";
  messages: ChatMessage[];
  /** The request's tool definitions as sent (rendered into the prompt). */
  tools: unknown[] | undefined;
  /** The same tools, read: name and parameter schema. */
  toolFunctions: ToolFunction[];
  toolChoice: ToolChoice;
  parallelToolCalls: boolean;
  outputFormat: OutputFormat;
  addGenerationPrompt: boolean;
  /** vLLM's continue_final_message: the reply goes on with the final (assistant) message. */
  continueFinalMessage: boolean;
}

export interface CompletionRequest extends CommonRequest {
  endpoint: "completion";
  prompts: PromptInput[];
}

export type GenerateRequest = ChatRequest | CompletionRequest;

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isPresent(value: unknown): boolean {
  return value !== undefined && value !== null;
}

function optionalString(body: Json, key: string): string | undefined {
  const value = body[key];
  if (!isPresent(value)) return undefined;
  if (typeof value !== "string") throw badRequest(`${key}: Input should be a valid string`, key);
  return value;
}

function optionalBoolean(body: Json, key: string): boolean | undefined {
  const value = body[key];
  if (!isPresent(value)) return undefined;
  if (typeof value !== "boolean") throw badRequest(`${key}: Input should be a valid boolean`, key);
  return value;
}

function optionalNumber(body: Json, key: string): number | undefined {
  const value = body[key];
  if (!isPresent(value)) return undefined;
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw badRequest(`${key}: Input should be a valid number`, key);
  }
  return value;
}

function optionalInteger(body: Json, key: string): number | undefined {
  const value = optionalNumber(body, key);
  if (value !== undefined && !Number.isInteger(value)) {
    throw badRequest(`${key}: Input should be a valid integer`, key);
  }
  return value;
}

const IGNORED_NUMBERS = [
  "temperature",
  "top_p",
  "top_k",
  "min_p",
  "presence_penalty",
  "frequency_penalty",
  "repetition_penalty",
  "length_penalty",
];

function parseCommon(body: Json): CommonRequest {
  for (const key of IGNORED_NUMBERS) optionalNumber(body, key);
  const temperature = optionalNumber(body, "temperature");
  if (temperature !== undefined && temperature < 0) {
    throw badRequest(`temperature must be non-negative, got ${temperature}.`, "temperature");
  }
  const stop = body["stop"];
  if (
    isPresent(stop) &&
    typeof stop !== "string" &&
    !(Array.isArray(stop) && stop.every((s) => typeof s === "string"))
  ) {
    throw badRequest("stop: Input should be a valid string or list of strings", "stop");
  }

  // vLLM prefers the newer max_completion_tokens over the deprecated max_tokens.
  const maxCompletion = optionalInteger(body, "max_completion_tokens");
  const maxTokens = maxCompletion ?? optionalInteger(body, "max_tokens");
  const maxKey = maxCompletion !== undefined ? "max_completion_tokens" : "max_tokens";
  if (maxTokens !== undefined && maxTokens < 1) {
    throw badRequest(`${maxKey} must be at least 1, got ${maxTokens}.`, maxKey);
  }

  const n = optionalInteger(body, "n") ?? 1;
  if (n < 1) throw badRequest(`n must be at least 1, got ${n}.`, "n");

  const stream = optionalBoolean(body, "stream") ?? false;
  const streamOptions = body["stream_options"];
  let includeUsage = false;
  if (isPresent(streamOptions)) {
    if (!stream) throw badRequest("Stream options can only be defined when `stream=True`.", "stream_options");
    if (!isObject(streamOptions))
      throw badRequest("stream_options: Input should be a valid object", "stream_options");
    includeUsage = optionalBoolean(streamOptions, "include_usage") ?? false;
    optionalBoolean(streamOptions, "continuous_usage_stats");
  }

  const cacheSalt = optionalString(body, "cache_salt");
  if (cacheSalt !== undefined && cacheSalt.length === 0) {
    throw badRequest("Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt");
  }

  return {
    model: optionalString(body, "model"),
    maxTokens,
    n,
    stream,
    includeUsage,
    seed: optionalInteger(body, "seed"),
    cacheSalt,
    ignoreEos: optionalBoolean(body, "ignore_eos") ?? false,
  };
}

/**
 * The endpoint's fields plus the common ones. Not `{ ...common, ...specific }`: V8 (Node 20) takes a slow path
 * for a spread followed by new keys, and that alone cost ~5 us, most of the parsing time, on every request.
 */
function withCommon<T extends { endpoint: string }>(common: CommonRequest, specific: T): CommonRequest & T {
  const request = specific as CommonRequest & T;
  request.model = common.model;
  request.maxTokens = common.maxTokens;
  request.n = common.n;
  request.stream = common.stream;
  request.includeUsage = common.includeUsage;
  request.seed = common.seed;
  request.cacheSalt = common.cacheSalt;
  request.ignoreEos = common.ignoreEos;
  return request;
}

export function parseContent(value: unknown, where: string, role: string): string {
  if (typeof value === "string") return value;
  if (!isPresent(value)) {
    // Only an assistant turn that carries tool calls may leave its content out.
    if (role === "assistant") return "";
    throw badRequest(`${where}.content: Field required`, "messages");
  }
  if (!Array.isArray(value))
    throw badRequest(`${where}.content: Input should be a string or a list of parts`, "messages");
  const texts: string[] = [];
  value.forEach((part: unknown, index) => {
    if (!isObject(part) || typeof part["type"] !== "string") {
      throw badRequest(`${where}.content[${index}]: each part needs a string 'type'`, "messages");
    }
    if (part["type"] !== "text") {
      throw badRequest(
        `${where}.content[${index}]: part type '${part["type"]}' is not supported by this text-only model`,
        "messages",
      );
    }
    if (typeof part["text"] !== "string")
      throw badRequest(`${where}.content[${index}].text: Field required`, "messages");
    texts.push(part["text"]);
  });
  return texts.join("\n");
}

export function parseToolCalls(value: unknown, where: string): ChatToolCall[] | undefined {
  if (!isPresent(value)) return undefined;
  if (!Array.isArray(value))
    throw badRequest(`${where}.tool_calls: Input should be a valid list`, "messages");
  return value.map((call: unknown, index) => {
    const fn = isObject(call) ? call["function"] : undefined;
    if (!isObject(fn) || typeof fn["name"] !== "string") {
      throw badRequest(`${where}.tool_calls[${index}].function.name: Field required`, "messages");
    }
    const args = fn["arguments"];
    const argumentsText = typeof args === "string" ? args : JSON.stringify(args ?? {});
    const id = isObject(call) && typeof call["id"] === "string" ? call["id"] : undefined;
    return { id, type: "function", function: { name: fn["name"], arguments: argumentsText } };
  });
}

const ROLES = new Set<ChatMessage["role"]>(["system", "developer", "user", "assistant", "tool", "function"]);

function parseMessages(value: unknown): ChatMessage[] {
  if (value === undefined) throw badRequest("messages: Field required", "messages");
  if (!Array.isArray(value)) throw badRequest("messages: Input should be a valid list", "messages");
  if (value.length === 0) throw badRequest("messages: List should have at least 1 item", "messages");
  return value.map((raw: unknown, index) => {
    const where = `messages[${index}]`;
    if (!isObject(raw)) throw badRequest(`${where}: Input should be a valid object`, "messages");
    const role = raw["role"];
    if (typeof role !== "string" || !ROLES.has(role as ChatMessage["role"])) {
      throw badRequest(`${where}.role: expected one of ${[...ROLES].join(", ")}`, "messages");
    }
    const typedRole = role as ChatMessage["role"];
    const message: ChatMessage = { role: typedRole, content: parseContent(raw["content"], where, typedRole) };
    const toolCalls = parseToolCalls(raw["tool_calls"], where);
    if (toolCalls) message.toolCalls = toolCalls;
    return message;
  });
}

export function parseChatRequest(body: unknown): ChatRequest {
  if (!isObject(body)) throw badRequest("Request body must be a JSON object");
  const common = parseCommon(body);
  const messages = parseMessages(body["messages"]);
  const tools = body["tools"];
  if (isPresent(tools) && (!Array.isArray(tools) || !tools.every(isObject))) {
    throw badRequest("tools: Input should be a list of objects", "tools");
  }
  if (common.n > MAX_CHOICES) throw badRequest(`n must be at most ${MAX_CHOICES}, got ${common.n}.`, "n");
  const toolFunctions = parseChatTools(Array.isArray(tools) ? tools : undefined);
  const addGenerationPrompt = optionalBoolean(body, "add_generation_prompt") ?? true;
  const continueFinalMessage = optionalBoolean(body, "continue_final_message") ?? false;
  if (continueFinalMessage && addGenerationPrompt) {
    // vLLM's own check (ChatCompletionRequest.check_generation_prompt).
    throw badRequest("Cannot set both `continue_final_message` and `add_generation_prompt` to True.");
  }
  if (continueFinalMessage && messages[messages.length - 1]?.role !== "assistant") {
    throw badRequest("continue_final_message needs the final message to be the assistant's", "messages");
  }
  return withCommon(common, {
    endpoint: "chat",
    messages,
    tools: Array.isArray(tools) ? tools : undefined,
    toolFunctions,
    toolChoice: parseToolChoice(body["tool_choice"], toolFunctions),
    parallelToolCalls: optionalBoolean(body, "parallel_tool_calls") ?? true,
    outputFormat: parseOutputFormat(body["response_format"], "response_format"),
    addGenerationPrompt,
    continueFinalMessage,
  });
}

function isTokenArray(value: unknown[]): value is number[] {
  return value.every((item) => typeof item === "number");
}

function checkTokenIds(ids: number[]): number[] {
  for (const id of ids) {
    if (!Number.isInteger(id) || id < 0 || id >= VOCAB_SIZE) {
      throw badRequest(`Token id ${id} is out of vocabulary`, "prompt");
    }
  }
  return ids;
}

function parsePrompts(value: unknown): PromptInput[] {
  if (value === undefined || value === null) throw badRequest("prompt: Field required", "prompt");
  let prompts: PromptInput[];
  if (typeof value === "string") prompts = [value];
  else if (Array.isArray(value) && value.length > 0 && isTokenArray(value)) prompts = [checkTokenIds(value)];
  else if (Array.isArray(value) && value.length > 0) {
    prompts = value.map((item: unknown) => {
      if (typeof item === "string") return item;
      if (Array.isArray(item) && isTokenArray(item)) return checkTokenIds(item);
      throw badRequest(
        "prompt: Input should be a string, a list of strings or a list of token ids",
        "prompt",
      );
    });
  } else {
    throw badRequest(
      "prompt: Input should be a non-empty string, list of strings or list of token ids",
      "prompt",
    );
  }
  if (prompts.some((prompt) => prompt.length === 0)) throw badRequest("Prompt cannot be empty", "prompt");
  return prompts;
}

export function parseCompletionRequest(body: unknown): CompletionRequest {
  if (!isObject(body)) throw badRequest("Request body must be a JSON object");
  const common = parseCommon(body);
  const prompts = parsePrompts(body["prompt"]);
  if (optionalString(body, "suffix") !== undefined)
    throw badRequest("suffix is not currently supported", "suffix");
  if (prompts.length * common.n > MAX_CHOICES) {
    throw badRequest(`at most ${MAX_CHOICES} choices (prompts x n) per request`, "n");
  }
  optionalBoolean(body, "echo");
  return withCommon(common, { endpoint: "completion", prompts });
}
