// The Responses API's continuation goes through the engine's chat API: vLLM renders a Responses request as the chat
// messages its template takes (instructions as the system turn, input items as turns, function calls as the
// assistant's tool calls), but its /v1/responses cannot leave a final assistant message open, and chat can
// (continue_final_message). So the request is written as the chat request that renders the same prompt, and
// continued as chat is; what cannot be written so (a stored conversation, images, hosted tools) is not continued.
import { GatewayError } from "../../core/errors.js";
import { HOSTED_TOOL_TYPES, NAMESPACE_SEPARATOR } from "../adaptation/responses-tools.js";
import { isRecord } from "./sse-events.js";

/** Sampling fields a Responses request shares with chat under the same name (vLLM's extensions included). */
const SHARED_FIELDS = [
  "model",
  "temperature",
  "top_p",
  "top_k",
  "min_p",
  "seed",
  "repetition_penalty",
  "presence_penalty",
  "frequency_penalty",
  "cache_salt",
  "ignore_eos",
  "priority",
  "user",
  "parallel_tool_calls",
];

/** Content part types that carry text (anything else, an image say, has no chat text equivalent here). */
const TEXT_PARTS = new Set(["input_text", "output_text", "text"]);

/** Why a Responses request's stream cannot be continued through chat; undefined when it can. */
export function responsesBlocker(body: Record<string, unknown>): string | undefined {
  if (typeof body["previous_response_id"] === "string")
    return "the conversation is stored on one engine (previous_response_id)";
  if (body["background"] === true) return "background mode";
  const text = body["text"];
  const format = isRecord(text) ? text["format"] : undefined;
  if (isRecord(format) && format["type"] !== "text") return "guided decoding (text.format)";
  if (typeof body["top_logprobs"] === "number" && body["top_logprobs"] > 0)
    return "top_logprobs was asked for";
  const include = body["include"];
  if (Array.isArray(include) && include.some((i) => typeof i === "string" && i.includes("logprobs")))
    return "logprobs were asked for (include)";
  try {
    inputMessages(body["input"]);
    chatTools(body["tools"], "check");
    chatToolChoice(body["tool_choice"], "check");
  } catch (err) {
    return err instanceof GatewayError ? err.message : String(err);
  }
  return undefined;
}

/**
 * The chat request that renders the prompt of Responses request `body` (what the engine was sent: the model id
 * and adaptation applied), streaming with usage. Throws a GatewayError for what chat cannot say.
 */
export function responsesAsChat(body: Record<string, unknown>): Record<string, unknown> {
  const chat: Record<string, unknown> = {};
  for (const field of SHARED_FIELDS) if (body[field] !== undefined) chat[field] = body[field];
  const instructions = body["instructions"];
  const system =
    typeof instructions === "string" && instructions !== ""
      ? [{ role: "system", content: instructions }]
      : [];
  chat["messages"] = [...system, ...inputMessages(body["input"])];
  // tool_choice "none" offers no tools: the prompt has none to render.
  const choice = chatToolChoice(body["tool_choice"], "write");
  const tools = chatTools(body["tools"], "write");
  if (tools.length > 0 && choice !== "none") chat["tools"] = tools;
  if (choice !== undefined) chat["tool_choice"] = choice;
  // The budget's clamp, if any, is in max_output_tokens already (upstream-body.ts writes the field the API reads).
  const limit = body["max_output_tokens"];
  if (typeof limit === "number") chat["max_tokens"] = limit;
  chat["stream"] = true;
  chat["stream_options"] = { include_usage: true };
  return chat;
}

function cannot(what: string): never {
  throw new GatewayError("invalid_request", what);
}

/** The input items as chat messages; consecutive function calls are one assistant turn, as the model wrote them. */
function inputMessages(input: unknown): Record<string, unknown>[] {
  if (typeof input === "string") return [{ role: "user", content: input }];
  if (!Array.isArray(input)) cannot("the input is neither text nor a list of items");
  const messages: Record<string, unknown>[] = [];
  for (const item of input as unknown[]) {
    if (!isRecord(item)) cannot("an input item is not an object");
    const type = item["type"] ?? "message";
    if (type === "message") {
      messages.push({ role: item["role"], content: textOf(item["content"]) });
    } else if (type === "function_call") {
      const call = {
        id: item["call_id"],
        type: "function",
        function: { name: flatCallName(item), arguments: item["arguments"] },
      };
      const last = messages.at(-1);
      if (last !== undefined && last["role"] === "assistant" && Array.isArray(last["tool_calls"]))
        (last["tool_calls"] as unknown[]).push(call);
      else messages.push({ role: "assistant", content: "", tool_calls: [call] });
    } else if (type === "function_call_output") {
      const output = item["output"];
      messages.push({
        role: "tool",
        ...(typeof item["call_id"] === "string" ? { tool_call_id: item["call_id"] } : {}),
        content: typeof output === "string" ? output : textOf(output),
      });
    } else if (type !== "reasoning") {
      // Reasoning items are not read back by the engines' templates; anything else has no chat turn.
      cannot(`an input item of type '${String(type)}'`);
    }
  }
  return messages;
}

function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) cannot("an input message's content is neither text nor parts");
  return (content as unknown[])
    .map((part) => {
      if (!isRecord(part) || !TEXT_PARTS.has(String(part["type"])) || typeof part["text"] !== "string")
        cannot(`an input part of type '${isRecord(part) ? String(part["type"]) : typeof part}'`);
      return part["text"];
    })
    .join("\n");
}

/** A function call's name as the model wrote it: a namespaced one under its flat name (as vLLM renders it). */
export function flatCallName(item: Record<string, unknown>): string {
  const name = typeof item["name"] === "string" ? item["name"] : "";
  const namespace = item["namespace"];
  return typeof namespace === "string" && namespace !== ""
    ? `${namespace}${NAMESPACE_SEPARATOR}${name}`
    : name;
}

/**
 * Function tools in the chat shape. Namespaces and hosted tools are flattened or dropped by the adaptation before
 * the engine sees them (`check` lets them by: the body `write` reads is the adapted one); any other tool type
 * has no chat form.
 */
function chatTools(tools: unknown, mode: "check" | "write"): Record<string, unknown>[] {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) cannot("tools is not a list");
  const out: Record<string, unknown>[] = [];
  for (const tool of tools as unknown[]) {
    const type = isRecord(tool) ? tool["type"] : undefined;
    // The whole tool as the function, as vLLM's Responses path hands it to the template
    // (convert_tool_responses_to_completions_format): the prompt renders alike.
    if (isRecord(tool) && type === "function") out.push({ type: "function", function: tool });
    else if (mode === "write" || !adaptable(type)) {
      cannot(`a tool of type '${String(type)}' (only function tools have a chat form)`);
    }
  }
  return out;
}

/** A tool type the adaptation flattens (namespace) or drops (hosted tools) when the operator lets it. */
function adaptable(type: unknown): boolean {
  return type === "namespace" || (typeof type === "string" && HOSTED_TOOL_TYPES.has(type));
}

function chatToolChoice(choice: unknown, mode: "check" | "write"): unknown {
  if (choice === undefined || choice === null || typeof choice === "string") return choice ?? undefined;
  if (isRecord(choice) && choice["type"] === "function" && typeof choice["name"] === "string")
    return { type: "function", function: { name: choice["name"] } };
  if (mode === "check" && isRecord(choice) && adaptable(choice["type"])) return undefined;
  return cannot(`tool_choice of type '${isRecord(choice) ? String(choice["type"]) : typeof choice}'`);
}
