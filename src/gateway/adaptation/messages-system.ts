// Claude Code's system text in a Messages API request, made safe for any engine and for its prefix cache.
//
// - A `role: "system"` message inside `messages` (Claude Code 2.1.2xx and later put one after the first user
//   turn): vLLM before 0.24 refuses it (its AnthropicMessage role was user or assistant), 0.24 to 0.25.1 render it
//   as a system turn where it stands, which templates that allow a system turn only first (Qwen3.x) refuse or
//   mis-render (vllm-project/vllm#48874). It is folded into the user message before it (else the one after it,
//   else a user message of its own), as vLLM's own newest code does when a template cannot mark it. Never hoisted
//   into the top-level `system`: that would change the head of every later turn's prompt, and so its cache.
// - The `x-anthropic-billing-header: cc_version=...; cc_entrypoint=...;` text block Claude Code puts first in
//   `system`: its version suffix differs between releases and sessions (and some releases add a per-request
//   `cch=` hash), so at the head of the prompt it would keep sessions from sharing the cached system prompt or,
//   varying per request, make every turn a miss. It means nothing to a model: it is dropped (vLLM's newest code
//   drops it too).
// Either way, each turn's body still extends the previous turn's: only the places that change are the same on
// every turn.

type Json = Record<string, unknown>;

export interface MessagesSystemSettings {
  foldSystemMessages: boolean;
  dropBillingHeader: boolean;
}

const BILLING_HEADER = "x-anthropic-billing-header";

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isBillingBlock(block: unknown): boolean {
  return isObject(block) && block["type"] === "text" && String(block["text"]).startsWith(BILLING_HEADER);
}

/** A system message's text: a string, or its text blocks joined. */
function systemText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((block): block is Json => isObject(block) && block["type"] === "text" && !isBillingBlock(block))
    .map((block) => String(block["text"]))
    .join("");
}

const join = (first: string, second: string): string => (first === "" ? second : `${first}\n\n${second}`);

/**
 * `text` added at one end of a message's content: joined to the text block there, else as a block of its own
 * (engines join a message's text blocks with nothing between them).
 */
function withText(content: unknown, text: string, atEnd: boolean): unknown {
  if (typeof content === "string") return atEnd ? join(content, text) : join(text, content);
  const blocks: unknown[] = Array.isArray(content) ? [...content] : [];
  const index = atEnd ? blocks.length - 1 : 0;
  const edge = blocks[index];
  if (isObject(edge) && edge["type"] === "text" && typeof edge["text"] === "string") {
    blocks[index] = { ...edge, text: atEnd ? join(edge["text"], text) : join(text, edge["text"]) };
    return blocks;
  }
  const block = { type: "text", text };
  return atEnd ? [...blocks, block] : [block, ...blocks];
}

/** The messages with every system message folded into a user message; undefined when there was none. */
function foldSystemMessages(messages: unknown[]): { messages: unknown[]; folded: number } | undefined {
  if (!messages.some((m) => isObject(m) && m["role"] === "system")) return undefined;
  const out: unknown[] = [];
  let pending: string[] = [];
  let folded = 0;
  for (const message of messages) {
    if (!isObject(message)) {
      out.push(message);
      continue;
    }
    if (message["role"] === "system") {
      folded += 1;
      const text = systemText(message["content"]);
      if (text.length === 0) continue;
      const previous = out.at(-1);
      // after a user turn (the placement Anthropic allows): at that turn's end
      if (pending.length === 0 && isObject(previous) && previous["role"] === "user")
        out[out.length - 1] = { ...previous, content: withText(previous["content"], text, true) };
      else pending.push(text);
      continue;
    }
    if (pending.length > 0) {
      const text = pending.join("\n\n");
      pending = [];
      if (message["role"] === "user") {
        out.push({ ...message, content: withText(message["content"], text, false) });
        continue;
      }
      out.push({ role: "user", content: text });
    }
    out.push(message);
  }
  if (pending.length > 0) out.push({ role: "user", content: pending.join("\n\n") });
  return { messages: out, folded };
}

/** The body with its system text adapted; undefined when nothing changed. */
export function adaptMessagesSystem(
  body: Json,
  settings: MessagesSystemSettings,
): { changes: string[]; body: Json } | undefined {
  const changes: string[] = [];
  let out = body;
  const system = body["system"];
  if (settings.dropBillingHeader && Array.isArray(system) && system.some(isBillingBlock)) {
    out = { ...out, system: system.filter((block) => !isBillingBlock(block)) };
    changes.push("drop_billing_header");
  }
  const messages = body["messages"];
  if (settings.foldSystemMessages && Array.isArray(messages)) {
    const result = foldSystemMessages(messages);
    if (result !== undefined) {
      out = { ...out, messages: result.messages };
      changes.push(`fold_system_messages:${result.folded}`);
    }
  }
  return changes.length === 0 ? undefined : { changes, body: out };
}
