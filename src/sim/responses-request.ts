// Validates `POST /v1/responses` bodies (the subset vLLM serves) into typed requests with chat messages.
import type { ChatMessage, ChatToolCall } from "./chat-template.js";
import { badRequest } from "../surface/errors.js";
import { parseOutputFormat, type OutputFormat } from "./structured-output.js";
import { parseToolChoice, type ToolChoice, type ToolFunction } from "./tool-calls.js";
import {
  flatToolName,
  normaliseToolChoice,
  parseResponsesTools,
  type NamespacedName,
  type ToolTypeSupport,
} from "./responses-tools.js";

export interface ResponsesRequest {
  model: string | undefined;
  /** The new input as chat messages (function calls and their outputs included). */
  input: ChatMessage[];
  instructions: string | null;
  /** The functions offered, in the chat shape the template renders (`{type, function: {...}}`). */
  chatTools: unknown[];
  /** The tools as the request sent them, echoed in the response object. */
  tools: unknown[];
  /** The functions the model may call, namespaced ones under their flat names (`<namespace>__<name>`). */
  toolFunctions: ToolFunction[];
  /** Flat name -> the client's namespace and name, for the calls handed back. */
  namespaced: ReadonlyMap<string, NamespacedName>;
  toolChoice: ToolChoice;
  /** As sent (echoed in the response object). */
  toolChoiceRaw: unknown;
  parallelToolCalls: boolean;
  outputFormat: OutputFormat;
  /** `text` as sent, echoed in the response object. */
  text: unknown;
  previousResponseId: string | undefined;
  store: boolean;
  stream: boolean;
  maxOutputTokens: number | undefined;
  temperature: number;
  topP: number;
  metadata: unknown;
  user: string | null;
  seed: number | undefined;
  cacheSalt: string | undefined;
  /** vLLM's extension: the reply is exactly max_output_tokens. */
  ignoreEos: boolean;
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function optional<T>(body: Json, key: string, type: "string" | "boolean" | "number"): T | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== type || (type === "number" && !Number.isFinite(value))) {
    throw badRequest(`${key}: Input should be a valid ${type}`, key);
  }
  return value as T;
}

/** The text of a message's content: a string, or input_text / output_text / text parts. */
function contentText(value: unknown, where: string): string {
  if (typeof value === "string") return value;
  if (!Array.isArray(value))
    throw badRequest(`${where}.content: Input should be a string or a list of parts`, "input");
  return value
    .map((part: unknown, index) => {
      const type = isObject(part) ? part["type"] : undefined;
      if (type !== "input_text" && type !== "output_text" && type !== "text") {
        throw badRequest(
          `${where}.content[${index}]: part type '${String(type)}' is not supported by this text-only model`,
          "input",
        );
      }
      const text = (part as Json)["text"];
      if (typeof text !== "string")
        throw badRequest(`${where}.content[${index}].text: Field required`, "input");
      return text;
    })
    .join("\n");
}

const MESSAGE_ROLES = new Set(["user", "system", "developer", "assistant"]);

/**
 * Input items as chat messages. Consecutive function_call items become one assistant message with several tool
 * calls: that is how the model wrote them (parallel calls in one turn), so the history re-renders to the tokens the
 * engine generated and its cached blocks are reused.
 */
export function inputMessages(value: unknown): ChatMessage[] {
  if (typeof value === "string") return [{ role: "user", content: value }];
  if (!Array.isArray(value)) throw badRequest("input: Input should be a string or a list of items", "input");
  const messages: ChatMessage[] = [];
  value.forEach((item: unknown, index) => {
    const where = `input[${index}]`;
    if (!isObject(item)) throw badRequest(`${where}: Input should be a valid object`, "input");
    const type = item["type"] ?? "message";
    switch (type) {
      case "message": {
        const role = item["role"];
        if (typeof role !== "string" || !MESSAGE_ROLES.has(role)) {
          throw badRequest(`${where}.role: expected one of ${[...MESSAGE_ROLES].join(", ")}`, "input");
        }
        messages.push({ role: role as ChatMessage["role"], content: contentText(item["content"], where) });
        return;
      }
      case "function_call": {
        const { call_id: callId, name, arguments: args, namespace } = item;
        if (typeof callId !== "string" || typeof name !== "string" || typeof args !== "string") {
          throw badRequest(`${where}: a function_call needs string call_id, name and arguments`, "input");
        }
        // A namespaced call re-renders under the flat name the model wrote it with (as vLLM does).
        const called =
          typeof namespace === "string" && namespace !== "" ? flatToolName(namespace, name) : name;
        const call: ChatToolCall = {
          id: callId,
          type: "function",
          function: { name: called, arguments: args },
        };
        const last = messages[messages.length - 1];
        if (last && last.role === "assistant" && last.toolCalls) last.toolCalls.push(call);
        else messages.push({ role: "assistant", content: "", toolCalls: [call] });
        return;
      }
      case "function_call_output": {
        const output = item["output"];
        // The openai SDK's FunctionCallOutput (the union vLLM validates with) has an optional call_id: Codex
        // sends outputs of no call (its goal objective, with `name` and `namespace`); vLLM renders them as tool turns.
        const callId = item["call_id"];
        if (callId !== undefined && callId !== null && typeof callId !== "string")
          throw badRequest(`${where}.call_id: Input should be a valid string`, "input");
        const text = typeof output === "string" ? output : contentText(output, where);
        messages.push({ role: "tool", content: text });
        return;
      }
      case "reasoning":
        // Reasoning items carry nothing this model reads back (vLLM drops them for non-reasoning models too).
        return;
      default:
        throw badRequest(`${where}.type: input items of type '${String(type)}' are not supported`, "input");
    }
  });
  return messages;
}

export function parseResponsesRequest(body: unknown, toolTypes: ToolTypeSupport = "vllm"): ResponsesRequest {
  if (!isObject(body)) throw badRequest("Request body must be a JSON object");
  if (body["input"] === undefined || body["input"] === null)
    throw badRequest("input: Field required", "input");
  if (body["background"] === true) {
    throw badRequest("background mode is not supported by this engine", "background");
  }
  const input = inputMessages(body["input"]);
  const tools = parseResponsesTools(body["tools"], toolTypes);
  const maxOutputTokens = optional<number>(body, "max_output_tokens", "number");
  if (maxOutputTokens !== undefined && (!Number.isInteger(maxOutputTokens) || maxOutputTokens < 1)) {
    throw badRequest(
      `max_output_tokens must be a positive integer, got ${maxOutputTokens}.`,
      "max_output_tokens",
    );
  }
  const text = body["text"];
  if (text !== undefined && text !== null && !isObject(text))
    throw badRequest("text: Input should be an object", "text");
  const cacheSalt = optional<string>(body, "cache_salt", "string");
  if (cacheSalt !== undefined && cacheSalt.length === 0) {
    throw badRequest("Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt");
  }
  const seed = optional<number>(body, "seed", "number");
  const toolChoiceRaw = body["tool_choice"] ?? "auto";
  return {
    model: optional<string>(body, "model", "string"),
    input,
    instructions: optional<string>(body, "instructions", "string") ?? null,
    chatTools: tools.chatTools,
    tools: Array.isArray(body["tools"]) ? body["tools"] : [],
    toolFunctions: tools.functions,
    namespaced: tools.namespaced,
    toolChoice: parseToolChoice(normaliseToolChoice(body["tool_choice"], tools), tools.functions),
    toolChoiceRaw,
    parallelToolCalls: optional<boolean>(body, "parallel_tool_calls", "boolean") ?? true,
    outputFormat: parseOutputFormat(isObject(text) ? text["format"] : undefined, "text.format", true),
    text: text ?? null,
    previousResponseId: optional<string>(body, "previous_response_id", "string"),
    store: optional<boolean>(body, "store", "boolean") ?? true,
    stream: optional<boolean>(body, "stream", "boolean") ?? false,
    maxOutputTokens,
    temperature: optional<number>(body, "temperature", "number") ?? 1,
    topP: optional<number>(body, "top_p", "number") ?? 1,
    metadata: body["metadata"] ?? null,
    user: optional<string>(body, "user", "string") ?? null,
    seed: seed !== undefined && Number.isInteger(seed) ? seed : undefined,
    cacheSalt,
    ignoreEos: optional<boolean>(body, "ignore_eos", "boolean") ?? false,
  };
}
