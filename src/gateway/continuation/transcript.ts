// What the client was sent of an answer so far, per API: the text (the continuation's prefill), the tool calls
// (whole or cut), the ids the rest must carry, and whatever rules a faithful continuation out.
import { dataJson, isRecord, type SseEvent } from "./sse-events.js";

/** A tool call as the client holds it: id, name, and the arguments text relayed so far. */
export interface ToolCallSoFar {
  /** The call's index in the client's stream (chat: tool_calls[].index; Messages: the content block's index). */
  readonly index: number;
  readonly id: string;
  readonly name: string;
  args: string;
  /** Messages: its content_block_stop went by (chat never says). */
  closed: boolean;
}

/** An answer relayed so far, whichever API: read by the continuation's request builder and its splicer. */
export interface AnswerTranscript {
  /** Records whole events the client was sent, in order. */
  record(events: readonly SseEvent[]): void;
  /** The answer's text relayed so far: the continuation's prefill. */
  readonly text: string;
  /** Events that carried that text, about one token each: the prefill's token count as usage reports it. */
  readonly textEvents: number;
  /** Tool calls relayed, whole or in part, in order. */
  readonly calls: readonly ToolCallSoFar[];
  /** Why this answer cannot be continued faithfully, once something relayed rules it out. */
  readonly blocker: string | undefined;
}

/** Chat and text completion streams (`data: {chunk}`, `[DONE]`). */
export class OpenAiTranscript implements AnswerTranscript {
  text = "";
  textEvents = 0;
  readonly calls: ToolCallSoFar[] = [];
  blocker: string | undefined;
  /** The first chunk's fields, which every later chunk repeats. */
  id: unknown;
  created: unknown;
  model: unknown;
  systemFingerprint: unknown;

  constructor(private readonly api: "chat" | "completions") {}

  record(events: readonly SseEvent[]): void {
    for (const event of events) {
      if (event.data === "[DONE]") {
        this.blocker ??= "the answer had ended";
        continue;
      }
      const chunk = dataJson(event);
      if (!isRecord(chunk)) continue;
      if (this.id === undefined) {
        this.id = chunk["id"];
        this.created = chunk["created"];
        this.model = chunk["model"];
        this.systemFingerprint = chunk["system_fingerprint"];
      }
      const choices = chunk["choices"];
      const choice: unknown = Array.isArray(choices) ? choices[0] : undefined;
      if (!isRecord(choice)) continue;
      if (choice["finish_reason"] !== null && choice["finish_reason"] !== undefined)
        this.blocker ??= "the answer had ended";
      if (this.api === "completions") this.addText(choice["text"]);
      else if (isRecord(choice["delta"])) this.recordDelta(choice["delta"]);
    }
  }

  private addText(text: unknown): void {
    if (typeof text !== "string" || text === "") return;
    if (this.calls.length > 0) this.blocker ??= "text followed a tool call";
    this.text += text;
    this.textEvents++;
  }

  private recordDelta(delta: Record<string, unknown>): void {
    this.addText(delta["content"]);
    const reasoning = delta["reasoning_content"] ?? delta["reasoning"];
    if (typeof reasoning === "string" && reasoning !== "")
      this.blocker ??= "reasoning was relayed (no engine-neutral way to prefill it)";
    const calls = delta["tool_calls"];
    if (!Array.isArray(calls)) return;
    for (const call of calls as unknown[]) {
      if (!isRecord(call) || typeof call["index"] !== "number") continue;
      const fn = isRecord(call["function"]) ? call["function"] : {};
      let known = this.calls.find((c) => c.index === call["index"]);
      if (known === undefined) {
        known = {
          index: call["index"],
          id: typeof call["id"] === "string" ? call["id"] : "",
          name: typeof fn["name"] === "string" ? fn["name"] : "",
          args: "",
          closed: false,
        };
        this.calls.push(known);
      }
      if (typeof fn["arguments"] === "string") known.args += fn["arguments"];
    }
  }
}

interface MessagesBlock {
  readonly type: string;
  closed: boolean;
}

/** Anthropic Messages streams (`event: x` + `data: {...}`). */
export class MessagesTranscript implements AnswerTranscript {
  text = "";
  textEvents = 0;
  readonly calls: ToolCallSoFar[] = [];
  blocker: string | undefined;
  /** Content blocks the client was sent, by index. */
  readonly blocks: MessagesBlock[] = [];
  /** message_start's usage (the prompt's), which the continued answer reports as its own. */
  startUsage: unknown;

  record(events: readonly SseEvent[]): void {
    for (const event of events) {
      const data = dataJson(event);
      if (!isRecord(data)) continue;
      switch (event.name) {
        case "message_start":
          this.startUsage = isRecord(data["message"]) ? data["message"]["usage"] : undefined;
          break;
        case "content_block_start":
          this.startBlock(data);
          break;
        case "content_block_delta":
          this.recordDelta(data);
          break;
        case "content_block_stop": {
          const block = typeof data["index"] === "number" ? this.blocks[data["index"]] : undefined;
          if (block !== undefined) block.closed = true;
          const call = this.calls.find((c) => c.index === data["index"]);
          if (call !== undefined) call.closed = true;
          break;
        }
        case "message_delta":
        case "message_stop":
          this.blocker ??= "the answer had ended";
          break;
      }
    }
  }

  /** The last block, when it is a text block still open (the continuation's text goes on in it). */
  get openTextIndex(): number | undefined {
    const last = this.blocks.length - 1;
    const block = this.blocks[last];
    return block !== undefined && block.type === "text" && !block.closed ? last : undefined;
  }

  private startBlock(data: Record<string, unknown>): void {
    const block = isRecord(data["content_block"]) ? data["content_block"] : {};
    const index = typeof data["index"] === "number" ? data["index"] : this.blocks.length;
    const type = typeof block["type"] === "string" ? block["type"] : "unknown";
    this.blocks[index] = { type, closed: false };
    if (type === "tool_use") {
      this.calls.push({
        index,
        id: typeof block["id"] === "string" ? block["id"] : "",
        name: typeof block["name"] === "string" ? block["name"] : "",
        args: "",
        closed: false,
      });
    } else if (type === "text") {
      if (this.calls.length > 0) this.blocker ??= "text followed a tool call";
      if (typeof block["text"] === "string" && block["text"] !== "") {
        this.text += block["text"];
        this.textEvents++;
      }
    } else this.blocker ??= `a ${type} block was relayed (only text and tool_use can be continued)`;
  }

  private recordDelta(data: Record<string, unknown>): void {
    const delta = isRecord(data["delta"]) ? data["delta"] : {};
    if (delta["type"] === "text_delta" && typeof delta["text"] === "string" && delta["text"] !== "") {
      this.text += delta["text"];
      this.textEvents++;
    } else if (delta["type"] === "input_json_delta" && typeof delta["partial_json"] === "string") {
      const call = this.calls.find((c) => c.index === data["index"]);
      if (call !== undefined) call.args += delta["partial_json"];
    }
  }
}
