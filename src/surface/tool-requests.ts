// Tools in a request as vLLM reads them (`tools`, `tool_choice`), and the tool calls an answer carries (whole or
// streamed): what both engines' OpenAI and Anthropic surfaces share.
import { badRequest } from "./errors.js";

export interface ToolFunction {
  name: string;
  parameters: unknown;
}

export type ToolChoice = "auto" | "none" | "required" | { name: string };

export interface PlannedCall {
  id: string;
  name: string;
  /** The arguments as vLLM returns them: a JSON string (Python's separators). */
  arguments: string;
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Reads chat-completions `tools` as vLLM's ChatCompletionToolsParam does: `{type: "function", function: {name,
 * parameters}}`, where `type` defaults to "function" and any other type is refused.
 */
export function parseChatTools(tools: readonly unknown[] | undefined): ToolFunction[] {
  return (tools ?? []).map((tool, index) => {
    const where = `tools[${index}]`;
    if (!isObject(tool)) throw badRequest(`${where}: Input should be a valid object`, "tools");
    const type = tool["type"] ?? "function";
    if (type !== "function") throw badRequest(`${where}.type: Input should be 'function'`, "tools");
    const fn = tool["function"];
    if (!isObject(fn)) throw badRequest(`${where}.function: Field required`, "tools");
    if (typeof fn["name"] !== "string") throw badRequest(`${where}.function.name: Field required`, "tools");
    return { name: fn["name"], parameters: fn["parameters"] ?? { type: "object", properties: {} } };
  });
}

/** Reads `tool_choice` in either API's spelling (`{type, function: {name}}` or `{type, name}`). */
export function parseToolChoice(value: unknown, tools: readonly ToolFunction[]): ToolChoice {
  if (value === undefined || value === null) return tools.length > 0 ? "auto" : "none";
  let choice: ToolChoice;
  if (value === "auto" || value === "none" || value === "required") choice = value;
  else if (isObject(value) && value["type"] === "function") {
    const fn = value["function"];
    const name = isObject(fn) ? fn["name"] : value["name"];
    if (typeof name !== "string")
      throw badRequest("tool_choice.function.name: Field required", "tool_choice");
    choice = { name };
  } else {
    throw badRequest(
      "tool_choice: expected 'none', 'auto', 'required' or {\"type\": \"function\", ...}",
      "tool_choice",
    );
  }
  if (choice !== "none" && choice !== "auto" && tools.length === 0) {
    throw badRequest("When using `tool_choice`, `tools` must be set.", "tool_choice");
  }
  if (typeof choice === "object" && !tools.some((tool) => tool.name === choice.name)) {
    throw badRequest(`Tool '${choice.name}' has not been passed in \`tools\`.`, "tool_choice");
  }
  return choice;
}

/** One streamed tool-call fragment, as vLLM's DeltaToolCall serializes (unset fields left out). */
export interface ToolCallDelta {
  index: number;
  id?: string;
  type?: "function";
  function: { name?: string; arguments?: string };
}

export interface StreamDelta {
  content?: string;
  toolCalls: ToolCallDelta[];
}
