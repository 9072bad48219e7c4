// Renders chat messages to prompt token ids the way Qwen2.5's ChatML template lays them out.
//
// Each message is `<|im_start|>role\n content <|im_end|>\n`; the prompt ends with `<|im_start|>assistant\n`.
// Every piece is tokenized on its own, so a conversation's ids always extend the ids of its earlier turns, and a
// reply the engine generated lines up with the same reply sent back as an assistant message.
import { pythonJson } from "./json-schema-values.js";
import { SPECIAL_TOKENS, encodeInto } from "./tokenizer.js";
import type { ChatMessage } from "../surface/chat-messages.js";

export type { ChatMessage, ChatToolCall } from "../surface/chat-messages.js";

/** Qwen2.5's template inserts this when the conversation has no system message. */
export const DEFAULT_SYSTEM_PROMPT = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

export interface RenderOptions {
  /** JSON-able tool definitions from the request, rendered into the system turn as Qwen's template does. */
  tools?: unknown[];
  addGenerationPrompt?: boolean;
  /**
   * vLLM's continue_final_message: the last message is left open (no end-of-turn after it), so the model goes on
   * with it; used with addGenerationPrompt false.
   */
  continueFinalMessage?: boolean;
}

function pushTurn(out: number[], role: string, content: string, open = false): void {
  out.push(SPECIAL_TOKENS.imStart);
  encodeInto(`${role}\n`, out);
  encodeInto(content, out);
  if (open) return;
  out.push(SPECIAL_TOKENS.imEnd);
  encodeInto("\n", out);
}

function toolsBlock(tools: unknown[]): string {
  const lines = tools.map((tool) => pythonJson(tool));
  return (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" +
    lines.join("\n") +
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within " +
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}' +
    "\n</tool_call>"
  );
}

/** A call's arguments as the template's `tojson` writes them (vLLM parses the JSON string first). */
function argumentsJson(text: string): string {
  try {
    return pythonJson(JSON.parse(text) as unknown);
  } catch {
    return JSON.stringify(text);
  }
}

/** An assistant turn: its text, then each call as a hermes block, exactly the text the model generates for it. */
export function assistantText(message: ChatMessage): string {
  let text = message.content;
  for (const call of message.toolCalls ?? []) {
    const body = `{"name": ${JSON.stringify(call.function.name)}, "arguments": ${argumentsJson(call.function.arguments)}}`;
    text += `${text.length > 0 ? "\n" : ""}<tool_call>\n${body}\n</tool_call>`;
  }
  return text;
}

export function renderChat(messages: readonly ChatMessage[], options: RenderOptions = {}): number[] {
  const out: number[] = [];
  const first = messages[0];
  const hasSystem = first !== undefined && (first.role === "system" || first.role === "developer");
  const tools = options.tools && options.tools.length > 0 ? toolsBlock(options.tools) : "";
  if (!hasSystem) pushTurn(out, "system", DEFAULT_SYSTEM_PROMPT + tools);
  messages.forEach((message, index) => {
    switch (message.role) {
      case "system":
      case "developer":
        pushTurn(out, "system", index === 0 ? message.content + tools : message.content);
        break;
      case "assistant":
        pushTurn(
          out,
          "assistant",
          assistantText(message),
          options.continueFinalMessage === true && index === messages.length - 1,
        );
        break;
      case "tool":
      case "function":
        // Qwen2.5 hands tool results back to the model as a user turn. (Its template merges a run of consecutive
        // tool messages into one such turn; one turn each keeps every conversation's ids a prefix of its sequels.)
        pushTurn(out, "user", `<tool_response>\n${message.content}\n</tool_response>`);
        break;
      default:
        pushTurn(out, "user", message.content);
    }
  });
  if (options.addGenerationPrompt ?? true) {
    out.push(SPECIAL_TOKENS.imStart);
    encodeInto("assistant\n", out);
  }
  return out;
}
