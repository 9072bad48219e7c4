// The placement key of a request without a session id: a hash of the prompt's leading part that agents of one template share.
import { hashString, type Hash64 } from "./hash.js";

/** Characters of a chat request's leading part (messages before the first user message, then tools) hashed at most. */
export const CHAT_PREFIX_MAX_CHARS = 4096;
/** Characters of a /v1/completions prompt hashed: its opening, which a template's requests share. */
export const COMPLETION_PREFIX_CHARS = 1024;
/** Token ids of a pre-tokenised /v1/completions prompt hashed. */
export const COMPLETION_PREFIX_TOKENS = 256;

// Separators: a role ends at \u0001, a message at \u0002, tools start at \u0003. Prompt text could contain them,
// and then two different leading parts might hash alike: that only changes where a request is placed.
const END_ROLE = "\u0001";
const END_MESSAGE = "\u0002";
const TOOLS = "\u0003";

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The text of a content: a string, or parts/blocks with text (OpenAI parts, Anthropic blocks). */
export function contentText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  let text = "";
  for (const part of content) if (isRecord(part) && typeof part["text"] === "string") text += part["text"];
  return text;
}

/** A message's text, or a Responses item's without content (a function call's name and arguments). */
function itemText(message: Record<string, unknown>): string {
  if (message["content"] !== undefined) return contentText(message["content"]);
  const parts = [message["name"], message["arguments"], message["output"]];
  return parts.filter((part): part is string => typeof part === "string").join(END_ROLE);
}

/**
 * The leading part of a chat request: every message before the first user message (system and developer
 * prompts, few-shot assistant turns), then the tool definitions, capped at CHAT_PREFIX_MAX_CHARS. Sampling
 * settings (temperature, max_tokens, ...), the user's turn and every later turn are not part of it: agents
 * of one template share it, and it is what an engine's prefix cache can reuse across them.
 */
export function chatPrefixText(body: Record<string, unknown>): string {
  return withTools(leadingMessages("", body["messages"]), body);
}

/**
 * The Responses API's leading part, the same way: `instructions` (its system prompt), the input items
 * before the first user message (none when `input` is a string: that is the user's turn), then the tools.
 */
export function responsesPrefixText(body: Record<string, unknown>): string {
  const instructions = body["instructions"];
  const head =
    typeof instructions === "string" && instructions !== ""
      ? "instructions" + END_ROLE + instructions + END_MESSAGE
      : "";
  return withTools(leadingMessages(head, body["input"]), body);
}

/** Anthropic Messages: `system` (a string or text blocks) is the system prompt, then the tools, as for chat. */
export function messagesPrefixText(body: Record<string, unknown>): string {
  const system = contentText(body["system"]);
  const head = system === "" ? "" : "system" + END_ROLE + system + END_MESSAGE;
  return withTools(leadingMessages(head, body["messages"]), body);
}

/** `text` followed by the role and text of every message before the first user message, capped. */
function leadingMessages(start: string, messages: unknown): string {
  let text = start;
  if (!Array.isArray(messages)) return text.slice(0, CHAT_PREFIX_MAX_CHARS);
  for (const message of messages) {
    if (!isRecord(message) || message["role"] === "user") break;
    // A Responses input item without a role (function_call, reasoning, ...) is named by its type.
    const name = message["role"] ?? message["type"];
    text += (typeof name === "string" ? name : "") + END_ROLE + itemText(message) + END_MESSAGE;
    if (text.length >= CHAT_PREFIX_MAX_CHARS) break;
  }
  return text.slice(0, CHAT_PREFIX_MAX_CHARS);
}

/** Appends the tool definitions (`tools`, and chat's legacy `functions`) to the leading part, capped. */
function withTools(leading: string, body: Record<string, unknown>): string {
  let text = leading;
  if (text.length >= CHAT_PREFIX_MAX_CHARS) return text;
  for (const field of ["tools", "functions"]) {
    const definitions = body[field];
    if (Array.isArray(definitions) && definitions.length > 0) text += TOOLS + JSON.stringify(definitions);
  }
  return text.length > CHAT_PREFIX_MAX_CHARS ? text.slice(0, CHAT_PREFIX_MAX_CHARS) : text;
}

/** The opening of a /v1/completions prompt (of its first prompt, for a batch). */
export function completionPrefixText(prompt: unknown): string {
  if (typeof prompt === "string") return prompt.slice(0, COMPLETION_PREFIX_CHARS);
  if (!Array.isArray(prompt) || prompt.length === 0) return "";
  if (typeof prompt[0] === "number") return prompt.slice(0, COMPLETION_PREFIX_TOKENS).join(",");
  return completionPrefixText(prompt[0]);
}

/** The key, or undefined when the request has no shared leading part (a chat that opens with the user). */
export function prefixKeyOf(
  endpoint: "chat" | "completions" | "responses" | "messages",
  body: Record<string, unknown>,
): Hash64 | undefined {
  const text =
    endpoint === "chat"
      ? chatPrefixText(body)
      : endpoint === "responses"
        ? responsesPrefixText(body)
        : endpoint === "messages"
          ? messagesPrefixText(body)
          : completionPrefixText(body["prompt"]);
  return text.length === 0 ? undefined : hashString(text);
}
