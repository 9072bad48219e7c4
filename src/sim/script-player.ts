// Plays a script: picks the conversation a request belongs to and its turn, and writes that turn as the text the
// model generates (hermes tool-call blocks for calls), so every API, streamed or not, answers it the usual way.
import { randomUUID } from "node:crypto";
import type { ChatMessage } from "./chat-template.js";
import { pythonJson } from "./json-schema-values.js";
import type { CompiledConversation, ScriptCall, ScriptTurn, SimScript } from "./script.js";
import type { PlannedCall, ToolCallPlan, ToolChoice, ToolFunction } from "./tool-calls.js";

/** What the player reads of a request (a subset of reply-plan's ReplyRequest). */
export interface ScriptedRequest {
  messages: readonly ChatMessage[];
  toolFunctions: readonly ToolFunction[];
  toolChoice: ToolChoice;
}

export interface ScriptedTurnReply {
  text: string;
  toolPlan?: ToolCallPlan;
}

function matches(conversation: CompiledConversation, system: string, firstUser: string): boolean {
  const pattern = conversation.pattern;
  if (pattern === undefined) return true;
  if (conversation.where !== "user" && pattern.test(system)) return true;
  return conversation.where !== "system" && pattern.test(firstUser);
}

/** The turn's call made with the first alternative the request offers, or undefined when it offers none. */
function pickAlternative(
  call: ScriptCall,
  offered: ReadonlySet<string>,
): { name: string; args: unknown } | undefined {
  if (Array.isArray(call)) {
    const alternative = call.find((entry) => offered.has(entry.tool));
    return alternative && { name: alternative.tool, args: alternative.arguments };
  }
  const names = typeof call.tool === "string" ? [call.tool] : call.tool;
  const name = names.find((entry) => offered.has(entry));
  return name === undefined ? undefined : { name, args: call.arguments };
}

/** A turn as generated text; undefined when it calls a tool the request does not offer. */
function renderTurn(turn: ScriptTurn, request: ScriptedRequest): ScriptedTurnReply | undefined {
  const wanted = turn.calls ?? (turn.call === undefined ? [] : [turn.call]);
  if (wanted.length === 0) return { text: turn.text ?? "" };
  const offered = new Set(
    request.toolChoice === "none" ? [] : request.toolFunctions.map((tool) => tool.name),
  );
  const calls: PlannedCall[] = [];
  for (const call of wanted) {
    const picked = pickAlternative(call, offered);
    if (!picked) return undefined;
    calls.push({
      id: `chatcmpl-tool-${randomUUID().replaceAll("-", "")}`,
      name: picked.name,
      arguments: pythonJson(picked.args),
    });
  }
  const blocks = calls.map(
    (call) =>
      `<tool_call>\n{"name": ${JSON.stringify(call.name)}, "arguments": ${call.arguments}}\n</tool_call>`,
  );
  const text = (turn.text ? `${turn.text}\n` : "") + blocks.join("\n");
  return { text, toolPlan: { mode: "auto", calls, text } };
}

/**
 * The scripted reply to a request, or undefined to let the engine generate as usual. The conversation is the
 * first whose `match` finds its pattern in the system prompt or the first user message; the turn is the number of
 * assistant messages already in the request. A request no conversation matches, a turn past the script's end, or
 * a call none of whose tools the request offers (a side request such as a title) gets the script's default.
 */
export function scriptedReply(script: SimScript, request: ScriptedRequest): ScriptedTurnReply | undefined {
  let system = "";
  let firstUser: string | undefined;
  let assistantTurns = 0;
  for (const message of request.messages) {
    if (message.role === "system" || message.role === "developer") system += `${message.content}\n`;
    else if (message.role === "assistant") assistantTurns += 1;
    else if (message.role === "user" && firstUser === undefined) firstUser = message.content;
  }
  const conversation = script.conversations.find((entry) => matches(entry, system, firstUser ?? ""));
  const turn = conversation?.turns[assistantTurns];
  const reply = turn === undefined ? undefined : renderTurn(turn, request);
  if (reply) return reply;
  const fallback = script.defaultTurn;
  if (fallback === undefined) return undefined;
  return renderTurn(fallback, request) ?? (fallback.text === undefined ? undefined : { text: fallback.text });
}
