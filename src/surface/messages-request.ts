// Reads an Anthropic Messages API request (POST /v1/messages) into the engine's chat form, as vLLM's Anthropic
// endpoint does: system and messages become chat turns, tool_use and tool_result blocks become tool calls and
// tool results, custom tools become function tools.
import type { ChatMessage, ChatToolCall } from "./chat-messages.js";
import { parseAnthropicTools } from "./anthropic-tools.js";
import { badRequest } from "./errors.js";
import type { ToolChoice, ToolFunction } from "./tool-requests.js";

type Json = Record<string, unknown>;

export interface MessagesRequest {
  model: string | undefined;
  maxTokens: number;
  stream: boolean;
  messages: ChatMessage[];
  toolFunctions: ToolFunction[];
  /** The tools as chat-completions definitions, as the chat template renders them. */
  chatTools: unknown[];
  toolChoice: ToolChoice;
  /** vLLM's sampling extension, accepted in the body here too: the reply is exactly max_tokens. */
  ignoreEos: boolean;
}

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** A content's text: a string, or the text of its text blocks (images and documents have none here). */
function blocksText(content: unknown, param: string): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content))
    throw badRequest(`${param}: expected a string or a list of content blocks`, param);
  return content
    .map((block) =>
      isObject(block) && block["type"] === "text" && typeof block["text"] === "string" ? block["text"] : "",
    )
    .join("");
}

/**
 * One Anthropic message as chat turns: tool results first (they answer the previous turn), then the text. A
 * `system` message inside `messages` (Claude Code's mid-conversation system messages) is a system turn where it
 * stands, as vLLM 0.24 and 0.25.1 render it (vllm-project/vllm#44283; issue #48874); with `systemMessages`
 * "refuse" it is the 400 of vLLM before 0.24, whose AnthropicMessage role was only user or assistant.
 */
function chatTurns(message: unknown, index: number, systemMessages: SystemMessagesMode): ChatMessage[] {
  const param = `messages[${index}]`;
  const roles = systemMessages === "render" ? ["user", "assistant", "system"] : ["user", "assistant"];
  if (!isObject(message) || !roles.includes(message["role"] as string)) {
    const expected = roles.map((role) => `"${role}"`).join(" | ");
    throw badRequest(`${param}: expected {"role": ${expected}, "content": ...}`, param);
  }
  const role = message["role"] as "user" | "assistant" | "system";
  const content = message["content"];
  if (role === "system") return [{ role, content: blocksText(content, `${param}.content`) }];
  if (typeof content === "string") return [{ role, content }];
  if (!Array.isArray(content))
    throw badRequest(`${param}.content: expected a string or a list of blocks`, param);
  const turns: ChatMessage[] = [];
  let text = "";
  const calls: ChatToolCall[] = [];
  for (const block of content) {
    if (!isObject(block)) throw badRequest(`${param}.content: every block must be an object`, param);
    if (block["type"] === "text" && typeof block["text"] === "string") text += block["text"];
    else if (block["type"] === "tool_use" && typeof block["name"] === "string") {
      calls.push({
        id: typeof block["id"] === "string" ? block["id"] : undefined,
        type: "function",
        function: { name: block["name"], arguments: JSON.stringify(block["input"] ?? {}) },
      });
    } else if (block["type"] === "tool_result") {
      turns.push({ role: "tool", content: blocksText(block["content"] ?? "", `${param}.content`) });
    }
    // thinking, image and document blocks carry no text the simulated model reads.
  }
  if (role === "assistant") turns.push({ role: "assistant", content: text, toolCalls: calls });
  else if (text.length > 0 || turns.length === 0) turns.push({ role: "user", content: text });
  return turns;
}

/**
 * Tools as vLLM's AnthropicTool reads them (src/sim/anthropic-tools.ts): `name` and `input_schema` required,
 * `type` ignored, so custom tools pass and server tools (web search, ...), which have no input_schema, are a 400.
 */
function readTools(tools: unknown): { functions: ToolFunction[]; chat: unknown[] } {
  const functions = parseAnthropicTools(tools);
  const chat = functions.map((fn, index) => {
    const description = (tools as Json[])[index]?.["description"];
    return {
      type: "function",
      function: { name: fn.name, description: description ?? "", parameters: fn.parameters },
    };
  });
  return { functions, chat };
}

function readToolChoice(value: unknown, tools: readonly ToolFunction[]): ToolChoice {
  if (value === undefined || value === null) return tools.length > 0 ? "auto" : "none";
  if (!isObject(value)) throw badRequest("tool_choice: expected an object", "tool_choice");
  switch (value["type"]) {
    case "auto":
      return tools.length > 0 ? "auto" : "none";
    case "any":
      return "required";
    case "none":
      return "none";
    case "tool":
      if (typeof value["name"] !== "string" || !tools.some((t) => t.name === value["name"])) {
        throw badRequest("tool_choice: names no tool of the request", "tool_choice");
      }
      return { name: value["name"] };
    default:
      throw badRequest("tool_choice.type: expected auto, any, tool or none", "tool_choice");
  }
}

/** The tools the prompt offers (rendered into it): none when tool_choice is none. */
export function promptTools(request: MessagesRequest): unknown[] | undefined {
  return request.toolChoice !== "none" && request.chatTools.length > 0 ? request.chatTools : undefined;
}

function readIgnoreEos(value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value !== "boolean")
    throw badRequest("ignore_eos: Input should be a valid boolean", "ignore_eos");
  return value;
}

/**
 * What a `role: "system"` message inside `messages` gets: rendered in place (vLLM 0.24 to 0.25.1, the default) or
 * refused with a 400 (vLLM before 0.24).
 */
export type SystemMessagesMode = "render" | "refuse";

/** `countOnly`: POST /v1/messages/count_tokens, which takes no max_tokens. */
export function parseMessagesRequest(
  body: unknown,
  countOnly = false,
  systemMessages: SystemMessagesMode = "render",
): MessagesRequest {
  if (!isObject(body)) throw badRequest("the body must be a JSON object");
  const model = body["model"];
  if (model !== undefined && typeof model !== "string") throw badRequest("model: expected a string", "model");
  const maxTokens = countOnly ? 1 : body["max_tokens"];
  if (typeof maxTokens !== "number" || !Number.isInteger(maxTokens) || maxTokens < 1) {
    throw badRequest("max_tokens: Field required (a positive integer)", "max_tokens");
  }
  const messages = body["messages"];
  if (!Array.isArray(messages) || messages.length === 0) {
    throw badRequest("messages: expected a non-empty list", "messages");
  }
  const system = body["system"];
  const turns: ChatMessage[] =
    system === undefined || system === null
      ? []
      : [{ role: "system", content: blocksText(system, "system") }];
  messages.forEach((message, index) => turns.push(...chatTurns(message, index, systemMessages)));
  const tools = readTools(body["tools"]);
  return {
    model,
    maxTokens,
    stream: body["stream"] === true,
    messages: turns,
    toolFunctions: tools.functions,
    chatTools: tools.chat,
    toolChoice: readToolChoice(body["tool_choice"], tools.functions),
    ignoreEos: readIgnoreEos(body["ignore_eos"]),
  };
}
