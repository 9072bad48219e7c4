// What the gateway reads from a completion request body: only the fields routing needs, validated shallowly.
import { LazyPromptBlocks, type PromptBlocks } from "../kv-events/prompt-blocks.js";
import type { Hash64 } from "../affinity/hash.js";
import { prefixKeyOf } from "../affinity/prefix-key.js";
import { promptBytes, routingText } from "../affinity/policies/routing-text.js";
import { GatewayError } from "../core/errors.js";
import { outputLimitFieldsOf } from "./output-limit.js";

export type Endpoint = "chat" | "completions" | "responses" | "messages";

export interface CompletionRequest {
  endpoint: Endpoint;
  /** The parsed body (kept for rewriting the model field when a tier hint sends it elsewhere). */
  body: Record<string, unknown>;
  /** undefined or "auto": routing decides the tier. */
  model: string | undefined;
  stream: boolean;
  /** Characters of prompt text (all messages' text, or the prompt): the router's long-prompt rule. */
  promptChars: number;
  /** The last message is a tool result or an assistant tool call: the agent loop is mid-step. */
  toolFollowup: boolean;
  /** The answer's token limit when the client set one (output-limit.ts: max_output_tokens for Responses). */
  maxTokens: number | undefined;
  /** Choices asked for (`n`, 1 by default): each may generate up to maxTokens. */
  choices: number;
  /** Messages of a chat request (1 for a completions prompt): each adds template tokens. */
  messageCount: number;
  /** Responses API: the stored response this one continues (it lives in one engine's memory). */
  previousResponseId: string | undefined;
  /** Responses API: whether the engine keeps this response for later turns (`store`, default true). */
  store: boolean;
  /**
   * Hash of the prompt's shared leading part (src/affinity/prefix-key.ts), the placement key of requests
   * without a session id; computed on first read, so requests that never need it never pay for it.
   */
  readonly prefixKey: Hash64 | undefined;
  /** The text the cache-aware policies route by (computed on first read: only they read it). */
  readonly routingText: string;
  readonly promptBytes: string;
}

/** Deeper JSON than this is refused: no OpenAI request needs it, and re-encoding it could exhaust the stack. */
export const MAX_JSON_NESTING = 128;

/**
 * The deepest nesting of objects and arrays in raw JSON bytes (strings skipped); stops past `limit`. A string is
 * skipped with indexOf to its closing quote (the first one not escaped), not byte by byte: most of a request's
 * bytes are its messages' text.
 */
export function jsonNesting(raw: Buffer, limit: number): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < raw.length; i++) {
    const byte = raw[i]!;
    if (byte === 0x22 /* " */) {
      i = closingQuote(raw, i);
      if (i < 0) return deepest; // an unterminated string: JSON.parse refuses it
    } else if (byte === 0x7b /* { */ || byte === 0x5b /* [ */) {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > limit) return deepest;
      }
    } else if (byte === 0x7d /* } */ || byte === 0x5d /* ] */) depth--;
  }
  return deepest;
}

/** Where the string opened at `open` closes: the next quote after an even run of backslashes; -1 if none. */
function closingQuote(raw: Buffer, open: number): number {
  let quote = raw.indexOf(0x22, open + 1);
  while (quote > 0) {
    let backslashes = 0;
    while (raw[quote - 1 - backslashes] === 0x5c /* \ */) backslashes++;
    if (backslashes % 2 === 0) return quote;
    quote = raw.indexOf(0x22, quote + 1);
  }
  return -1;
}

/** A positive integer field, or undefined when absent or null; anything else is a 400 naming it. */
function positiveIntField(body: Record<string, unknown>, name: string): number | undefined {
  const value = body[name];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1) {
    throw new GatewayError("invalid_request", `'${name}' must be a positive integer`, { param: name });
  }
  return value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Text length of an OpenAI message content: a string, or an array of parts with text. */
function contentChars(content: unknown): number {
  if (typeof content === "string") return content.length;
  if (!Array.isArray(content)) return 0;
  let chars = 0;
  for (const part of content) {
    if (isRecord(part) && typeof part["text"] === "string") chars += part["text"].length;
  }
  return chars;
}

function promptChars(prompt: unknown): number {
  if (typeof prompt === "string") return prompt.length;
  if (Array.isArray(prompt)) {
    let chars = 0;
    for (const item of prompt)
      chars += typeof item === "string" ? item.length : Array.isArray(item) ? item.length : 0;
    return chars;
  }
  return 0;
}

export function parseCompletionRequest(raw: Buffer, endpoint: Endpoint): CompletionRequest {
  if (jsonNesting(raw, MAX_JSON_NESTING) > MAX_JSON_NESTING) {
    throw new GatewayError("invalid_request", `request body nests deeper than ${MAX_JSON_NESTING} levels`);
  }
  let body: unknown;
  try {
    // TextDecoder with fatal: invalid UTF-8 is a client error, not silently replaced characters.
    body = JSON.parse(utf8.decode(raw));
  } catch (err) {
    const why = err instanceof Error ? err.message : "not JSON";
    throw new GatewayError("invalid_json", `request body is not valid UTF-8 JSON: ${why}`);
  }
  if (!isRecord(body)) throw new GatewayError("invalid_request", "request body must be a JSON object");

  const model = body["model"];
  if (model !== undefined && typeof model !== "string") {
    throw new GatewayError("invalid_request", "'model' must be a string", { param: "model" });
  }
  const stream = body["stream"];
  if (stream !== undefined && stream !== null && typeof stream !== "boolean") {
    throw new GatewayError("invalid_request", "'stream' must be a boolean", { param: "stream" });
  }

  let maxTokens: number | undefined;
  for (const field of outputLimitFieldsOf(endpoint)) maxTokens ??= positiveIntField(body, field);
  const choices = positiveIntField(body, "n") ?? 1;
  let messageCount = 1;
  let chars = 0;
  let toolFollowup = false;
  if (endpoint === "chat") {
    const messages = body["messages"];
    if (!Array.isArray(messages) || messages.length === 0) {
      throw new GatewayError("invalid_request", "'messages' must be a non-empty array", {
        param: "messages",
      });
    }
    for (let i = 0; i < messages.length; i++) {
      const message: unknown = messages[i];
      if (!isRecord(message) || typeof message["role"] !== "string") {
        throw new GatewayError("invalid_request", `'messages[${i}]' must be an object with a string 'role'`, {
          param: `messages[${i}]`,
        });
      }
      chars += contentChars(message["content"]);
    }
    messageCount = messages.length;
    const last = messages[messages.length - 1] as Record<string, unknown>;
    toolFollowup =
      last["role"] === "tool" ||
      (last["role"] === "assistant" && Array.isArray(last["tool_calls"]) && last["tool_calls"].length > 0);
  } else if (endpoint === "responses") {
    ({ chars, toolFollowup } = readResponsesInput(body));
  } else if (endpoint === "messages") {
    ({ chars, toolFollowup, messageCount } = readAnthropicMessages(body));
  } else {
    const prompt = body["prompt"];
    if (prompt === undefined || prompt === null) {
      throw new GatewayError("invalid_request", "'prompt' is required", { param: "prompt" });
    }
    chars = promptChars(prompt);
  }
  const previous = body["previous_response_id"];
  if (previous !== undefined && previous !== null && (typeof previous !== "string" || previous === "")) {
    throw new GatewayError("invalid_request", "'previous_response_id' must be a non-empty string", {
      param: "previous_response_id",
    });
  }

  return new ParsedCompletionRequest(
    endpoint,
    body,
    model === undefined || model === "auto" ? undefined : model,
    stream === true,
    chars,
    toolFollowup,
    maxTokens,
    choices,
    messageCount,
    endpoint === "responses" && typeof previous === "string" ? previous : undefined,
    body["store"] !== false,
  );
}

/**
 * A class, not an object literal with getters: a literal that defines accessors is built in dictionary
 * mode on every request (about 2 µs), a class instance in tens of nanoseconds.
 */
class ParsedCompletionRequest implements CompletionRequest {
  private lazyPrefixKey: Hash64 | null | undefined; // null: computed, and there is none
  private lazyRoutingText: string | undefined;
  private lazyPromptBytes: string | undefined;
  private lazyKvBlocks: LazyPromptBlocks | undefined;

  constructor(
    readonly endpoint: Endpoint,
    readonly body: Record<string, unknown>,
    readonly model: string | undefined,
    readonly stream: boolean,
    readonly promptChars: number,
    readonly toolFollowup: boolean,
    readonly maxTokens: number | undefined,
    readonly choices: number,
    readonly messageCount: number,
    readonly previousResponseId: string | undefined,
    readonly store: boolean,
  ) {}

  get prefixKey(): Hash64 | undefined {
    if (this.lazyPrefixKey === undefined) this.lazyPrefixKey = prefixKeyOf(this.endpoint, this.body) ?? null;
    return this.lazyPrefixKey ?? undefined;
  }

  get routingText(): string {
    return (this.lazyRoutingText ??= routingText(this.endpoint, this.body));
  }

  get promptBytes(): string {
    return (this.lazyPromptBytes ??= promptBytes(this.endpoint, this.body));
  }

  /** The prompt's KV blocks, for placement by engines' KV events (computed only when one publishes them). */
  kvPromptBlocks(blockSizeTokens: number): PromptBlocks | undefined {
    return (this.lazyKvBlocks ??= new LazyPromptBlocks(this.endpoint, this.body)).of(blockSizeTokens);
  }
}

/**
 * Anthropic Messages (`system`, `messages` of text, tool_use and tool_result blocks): text length, message count,
 * and whether the last message carries a tool result (the agent loop is mid-step).
 */
function readAnthropicMessages(body: Record<string, unknown>): {
  chars: number;
  toolFollowup: boolean;
  messageCount: number;
} {
  const messages = body["messages"];
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new GatewayError("invalid_request", "'messages' must be a non-empty array", { param: "messages" });
  }
  let chars = contentChars(body["system"]);
  let toolFollowup = false;
  for (let i = 0; i < messages.length; i++) {
    const message: unknown = messages[i];
    if (!isRecord(message) || typeof message["role"] !== "string") {
      throw new GatewayError("invalid_request", `'messages[${i}]' must be an object with a string 'role'`, {
        param: `messages[${i}]`,
      });
    }
    const content = message["content"];
    chars += contentChars(content);
    toolFollowup = false;
    if (Array.isArray(content)) {
      for (const block of content) {
        if (!isRecord(block)) continue;
        if (block["type"] === "tool_result") {
          toolFollowup = true;
          chars += contentChars(block["content"]);
        } else if (block["type"] === "tool_use") chars += JSON.stringify(block["input"] ?? null).length;
      }
    }
  }
  return { chars, toolFollowup, messageCount: messages.length };
}

/**
 * The Responses API's `input` (a string, or items: messages with text content, function calls and their
 * outputs) and `instructions`: their text length, and whether the last item is a tool result.
 */
function readResponsesInput(body: Record<string, unknown>): { chars: number; toolFollowup: boolean } {
  const input = body["input"];
  const instructions = body["instructions"];
  let chars = typeof instructions === "string" ? instructions.length : 0;
  if (typeof input === "string") return { chars: chars + input.length, toolFollowup: false };
  if (!Array.isArray(input) || input.length === 0) {
    throw new GatewayError("invalid_request", "'input' must be a string or a non-empty array of items", {
      param: "input",
    });
  }
  for (let i = 0; i < input.length; i++) {
    const item: unknown = input[i];
    if (!isRecord(item)) {
      throw new GatewayError("invalid_request", `'input[${i}]' must be an object`, { param: `input[${i}]` });
    }
    chars += contentChars(item["content"]);
    if (typeof item["output"] === "string") chars += item["output"].length;
    if (typeof item["arguments"] === "string") chars += item["arguments"].length;
  }
  const last = input[input.length - 1] as Record<string, unknown>;
  return { chars, toolFollowup: last["type"] === "function_call_output" };
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The last turn's text (last message, prompt or input), at most 2000 characters: logs and the classifier. */
export function lastTurnText(request: CompletionRequest): string {
  const messages = request.body["messages"];
  const source = Array.isArray(messages)
    ? (messages.at(-1) as Record<string, unknown>)["content"]
    : (request.body["prompt"] ?? request.body["input"]);
  const text = typeof source === "string" ? source : JSON.stringify(source ?? null);
  return text.length > 2000 ? `${text.slice(0, 2000)}...` : text;
}
