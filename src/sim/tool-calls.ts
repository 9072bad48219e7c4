// Tool calls as Qwen2.5 writes them and vLLM's parsers hand them back: the decision, the text, and its parsing.
//
// With tool_choice "auto" the model writes hermes blocks (`<tool_call>\n{"name": ..., "arguments": {...}}\n
// </tool_call>`) and vLLM's hermes parser turns them into `tool_calls`; "required" is guided decoding of a JSON list
// `[{"name": ..., "parameters": {...}}]`; a named function is guided decoding of its arguments object alone. The
// simulator generates exactly that text (token by token, so usage counts it), then parses it back the way vLLM does,
// both whole (JSON answers) and incrementally (streamed deltas).
import { randomUUID } from "node:crypto";
import type { Random } from "../core/random.js";
import {
  parseChatTools,
  parseToolChoice,
  type PlannedCall,
  type StreamDelta,
  type ToolCallDelta,
  type ToolChoice,
  type ToolFunction,
} from "../surface/tool-requests.js";

export { parseChatTools, parseToolChoice };
export type { PlannedCall, StreamDelta, ToolCallDelta, ToolChoice, ToolFunction };
import { pythonJson, valueForSchema } from "./json-schema-values.js";

export type ToolCallMode = "auto" | "required" | "named";

/** How often the model calls a tool, per engine (the `--tool-call-rate` knobs). */
export interface ToolCallRates {
  /** Chance of a call when tool_choice is auto and the last message is not a tool result. */
  afterUser: number;
  /** Chance of a call when the last message is a tool result (0: the model answers in text, so loops end). */
  afterToolResult: number;
  /** Chance of each further parallel call (when parallel_tool_calls is not false and several tools exist). */
  parallel: number;
  /** Most calls in one message. */
  maxParallel: number;
}

export const DEFAULT_TOOL_CALL_RATES: ToolCallRates = {
  afterUser: 1,
  afterToolResult: 0,
  parallel: 0,
  maxParallel: 3,
};

/** The tool-call text a choice will generate, and how to read it back. */
export interface ToolCallPlan {
  mode: ToolCallMode;
  calls: PlannedCall[];
  text: string;
}

export interface ToolCallDecision {
  tools: readonly ToolFunction[];
  choice: ToolChoice;
  /** The conversation's last message is a tool result. */
  afterToolResult: boolean;
  parallelAllowed: boolean;
  rates: ToolCallRates;
}

function hermesBlock(call: PlannedCall): string {
  return `<tool_call>\n{"name": ${JSON.stringify(call.name)}, "arguments": ${call.arguments}}\n</tool_call>`;
}

/** Whether this choice calls tools, which and with what, drawn from `random`; undefined for a text answer. */
export function planToolCalls(decision: ToolCallDecision, random: Random): ToolCallPlan | undefined {
  const { tools, choice, rates } = decision;
  if (tools.length === 0 || choice === "none") return undefined;
  if (choice === "auto") {
    const rate = decision.afterToolResult ? rates.afterToolResult : rates.afterUser;
    if (!(random.next() < rate)) return undefined;
  }
  const candidates = typeof choice === "object" ? tools.filter((tool) => tool.name === choice.name) : tools;
  let count = 1;
  if (typeof choice !== "object" && decision.parallelAllowed) {
    while (count < rates.maxParallel && random.next() < rates.parallel) count++;
  }
  const calls: PlannedCall[] = [];
  for (let i = 0; i < count; i++) {
    const tool = candidates[Math.floor(random.next() * candidates.length)] as ToolFunction;
    calls.push({
      id: `chatcmpl-tool-${randomUUID().replaceAll("-", "")}`,
      name: tool.name,
      arguments: pythonJson(valueForSchema(tool.parameters, random)),
    });
  }
  const mode: ToolCallMode = typeof choice === "object" ? "named" : choice;
  let text: string;
  if (mode === "named") text = (calls[0] as PlannedCall).arguments;
  else if (mode === "required") {
    text = `[${calls.map((call) => `{"name": ${JSON.stringify(call.name)}, "parameters": ${call.arguments}}`).join(", ")}]`;
  } else text = calls.map(hermesBlock).join("\n");
  return { mode, calls, text };
}

/** What a finished choice carries: its content and the tool calls parsed from the text it generated. */
export interface ParsedOutput {
  content: string | null;
  calls: PlannedCall[];
}

const TOOL_CALL_START = "<tool_call>";
const TOOL_CALL_END = "</tool_call>";

/**
 * Reads a whole generated text as vLLM does for a JSON answer. A text cut short by max_tokens no longer parses:
 * then, as in vLLM, it is all content and there are no tool calls (a named call keeps its raw arguments).
 */
export function parseToolOutput(plan: ToolCallPlan, text: string): ParsedOutput {
  const complete = text === plan.text;
  if (plan.mode === "named") {
    return { content: "", calls: [{ ...(plan.calls[0] as PlannedCall), arguments: text }] };
  }
  if (!complete) return { content: text, calls: [] };
  if (plan.mode === "required") return { content: "", calls: plan.calls };
  const start = text.indexOf(TOOL_CALL_START);
  return { content: start > 0 ? text.slice(0, start) : null, calls: plan.calls };
}

/** Length of the longest suffix of `text` that is a proper prefix of `tag` (a tag that may still be arriving). */
function partialTagOverlap(text: string, tag: string): number {
  for (let length = Math.min(tag.length - 1, text.length); length > 0; length--) {
    if (text.endsWith(tag.slice(0, length))) return length;
  }
  return 0;
}

/** The value after `"key":` in a possibly unfinished JSON object, up to its balanced end if it has one. */
function valueAfterKey(json: string, key: string): string | undefined {
  const match = new RegExp(`"${key}"\\s*:\\s*`).exec(json);
  if (!match) return undefined;
  const raw = json.slice(match.index + match[0].length);
  const open = raw[0];
  if (open !== "{" && open !== "[") return raw;
  const close = open === "{" ? "}" : "]";
  let depth = 0;
  let inString = false;
  let escaped = false;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i];
    if (inString) {
      if (escaped) escaped = false;
      else if (c === "\\") escaped = true;
      else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') inString = true;
    else if (c === open) depth++;
    else if (c === close && --depth === 0) return raw.slice(0, i + 1);
  }
  return raw;
}

const NAME_PATTERN = /"name"\s*:\s*"([^"]+)"/;

/**
 * Turns a choice's growing text into stream deltas the way vLLM's streaming tool parsers do: plain text before
 * the first call goes out as content (held back while it could be the start of a tag), a call's first delta
 * carries its id, type and name once the name is complete, then its arguments follow in fragments.
 */
export class ToolCallStreamer {
  private text = "";
  private sentContent = 0;
  private readonly sentArguments: string[] = [];
  /** Per call, whether its first delta (id and name) has gone out. */
  private readonly started: boolean[] = [];

  constructor(private readonly plan: ToolCallPlan) {}

  /** Calls whose first delta (id and name) has gone out. */
  get callsStarted(): number {
    return this.started.filter(Boolean).length;
  }

  /** A named tool_choice: guided decoding, not the hermes parser. */
  get isNamedChoice(): boolean {
    return this.plan.mode === "named";
  }

  /** Appends one token's text; returns what to send for it, or undefined when nothing is ready yet. */
  push(tokenText: string): StreamDelta | undefined {
    this.text += tokenText;
    if (this.plan.mode === "named") return this.pushNamed(tokenText);
    const delta: StreamDelta = { toolCalls: [] };
    const regions = this.plan.mode === "auto" ? this.hermesRegions() : this.listRegions();
    if (this.plan.mode === "auto") {
      const content = this.unsentContent();
      if (content) delta.content = content;
    }
    const argumentsKey = this.plan.mode === "auto" ? "arguments" : "parameters";
    for (let index = 0; index < regions.length; index++) {
      const region = regions[index] as string;
      if (!this.started[index]) {
        const name = NAME_PATTERN.exec(region)?.[1];
        // A later call cannot start before this one has its name.
        if (name === undefined) break;
        this.started[index] = true;
        this.sentArguments[index] = "";
        const call = this.plan.calls[index];
        delta.toolCalls.push({
          index,
          id: call?.id ?? `chatcmpl-tool-${randomUUID().replaceAll("-", "")}`,
          type: "function",
          function: { name },
        });
      }
      const args = valueAfterKey(region, argumentsKey)?.trimEnd();
      const sent = this.sentArguments[index] ?? "";
      if (args !== undefined && args.length > sent.length) {
        delta.toolCalls.push({ index, function: { arguments: args.slice(sent.length) } });
        this.sentArguments[index] = args;
      }
    }
    return delta.content !== undefined || delta.toolCalls.length > 0 ? delta : undefined;
  }

  private pushNamed(tokenText: string): StreamDelta | undefined {
    if (tokenText.length === 0) return undefined;
    const call = this.plan.calls[0] as PlannedCall;
    if (this.started[0]) return { toolCalls: [{ index: 0, function: { arguments: tokenText } }] };
    this.started[0] = true;
    return {
      toolCalls: [
        { index: 0, id: call.id, type: "function", function: { name: call.name, arguments: tokenText } },
      ],
    };
  }

  private unsentContent(): string | undefined {
    const tag = this.text.indexOf(TOOL_CALL_START);
    const sendable = tag >= 0 ? tag : this.text.length - partialTagOverlap(this.text, TOOL_CALL_START);
    if (sendable <= this.sentContent) return undefined;
    const content = this.text.slice(this.sentContent, sendable);
    this.sentContent = sendable;
    return content;
  }

  /** The JSON text of each `<tool_call>` region so far (the last may be unfinished). */
  private hermesRegions(): string[] {
    const regions: string[] = [];
    let position = 0;
    for (;;) {
      const start = this.text.indexOf(TOOL_CALL_START, position);
      if (start < 0) break;
      const bodyStart = start + TOOL_CALL_START.length;
      const end = this.text.indexOf(TOOL_CALL_END, bodyStart);
      if (end >= 0) {
        regions.push(this.text.slice(bodyStart, end).trim());
        position = end + TOOL_CALL_END.length;
        continue;
      }
      let raw = this.text.slice(bodyStart);
      const overlap = partialTagOverlap(raw, TOOL_CALL_END);
      if (overlap > 0) raw = raw.slice(0, -overlap);
      regions.push(raw.trim());
      break;
    }
    return regions;
  }

  /** The text of each element of the "required" JSON list so far, split at top-level commas. */
  private listRegions(): string[] {
    const regions: string[] = [];
    let depth = 0;
    let inString = false;
    let escaped = false;
    let start = -1;
    for (let i = 0; i < this.text.length; i++) {
      const c = this.text[i];
      if (inString) {
        if (escaped) escaped = false;
        else if (c === "\\") escaped = true;
        else if (c === '"') inString = false;
        continue;
      }
      if (c === '"') inString = true;
      else if (c === "{" || c === "[") {
        depth++;
        if (depth === 2 && c === "{") start = i;
      } else if (c === "}" || c === "]") {
        if (depth === 2 && start >= 0) {
          regions.push(this.text.slice(start, i + 1));
          start = -1;
        }
        depth--;
      }
    }
    if (start >= 0) regions.push(this.text.slice(start));
    return regions;
  }
}
