// Anthropic Messages API answers independent of the engine behind them: usage, the message object, the event
// stream's content blocks, and the error envelope. The simulator and the real llama.cpp engine both write these.
import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import { anthropicType } from "../core/errors.js";
import { writeJson } from "../core/write-json.js";
import type { SimRequestError } from "./errors.js";
import type { StreamDelta } from "./tool-requests.js";

export type MessagesStopReason = "end_turn" | "max_tokens" | "tool_use";

export type MessagesContentBlock =
  { type: "text"; text: string } | { type: "tool_use"; id: string; name: string; input: unknown };

/** A new message id, `msg_` and 32 hex digits. */
export function messageId(): string {
  return `msg_${randomUUID().replaceAll("-", "")}`;
}

/** A tool_use block's id from the engine's call id (or a fresh one): `toolu_` and up to 24 alphanumerics. */
export function toolUseId(callId: string | undefined): string {
  return `toolu_${(callId ?? randomUUID()).replace(/[^A-Za-z0-9]/g, "").slice(-24)}`;
}

/**
 * Anthropic's usage: `input_tokens` are the prompt tokens not read from the cache, `cache_read_input_tokens` the
 * ones that were (the engine's prefix-cache hits); the whole prompt is their sum.
 */
export function messagesUsage(
  promptTokens: number,
  cachedTokens: number,
  outputTokens: number,
): Record<string, number> {
  return {
    input_tokens: promptTokens - cachedTokens,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: cachedTokens,
    output_tokens: outputTokens,
  };
}

/** The stop reason of an engine's finish: the length limit, else a tool call, else the end of the turn. */
export function messagesStopReason(finishReason: "stop" | "length", toolUse: boolean): MessagesStopReason {
  if (finishReason === "length") return "max_tokens";
  return toolUse ? "tool_use" : "end_turn";
}

/** One server-sent event of the Messages stream: its type named twice, as Anthropic sends it. */
export function messagesEvent(type: string, data: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
}

export interface MessageIdentity {
  id: string;
  model: string;
}

/** The whole message object of a JSON answer. */
export function messageBody(
  identity: MessageIdentity,
  content: readonly MessagesContentBlock[],
  stopReason: MessagesStopReason,
  usage: Record<string, number>,
): string {
  return JSON.stringify({
    id: identity.id,
    type: "message",
    role: "assistant",
    model: identity.model,
    content,
    stop_reason: stopReason,
    stop_sequence: null,
    usage,
  });
}

/**
 * The event stream of one message: message_start, content blocks opened, filled and closed as deltas arrive (text
 * and tool calls), then message_delta and message_stop. Each call returns the events to write.
 */
export class MessagesEventStream {
  private started = false;
  /** The index of the content block being streamed, and its kind; undefined when none is open. */
  private open: { index: number; kind: "text" | "tool_use" } | undefined;
  private blocks = 0;
  private toolUse = false;

  constructor(private readonly identity: MessageIdentity) {}

  /** Whether a tool_use block was streamed (the stop reason is then tool_use). */
  get sawToolUse(): boolean {
    return this.toolUse;
  }

  /** message_start, once: its usage carries the prompt's cached part, known once the prompt was prefilled. */
  start(promptTokens: number, cachedTokens: number): string[] {
    if (this.started) return [];
    this.started = true;
    return [
      messagesEvent("message_start", {
        message: {
          id: this.identity.id,
          type: "message",
          role: "assistant",
          model: this.identity.model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: messagesUsage(promptTokens, cachedTokens, 0),
        },
      }),
    ];
  }

  /** The events of new text and tool-call fragments. */
  delta(delta: StreamDelta): string[] {
    const events: string[] = [];
    if (delta.content !== undefined && delta.content.length > 0) {
      if (this.open?.kind !== "text") {
        this.closeBlock(events);
        this.open = { index: this.blocks++, kind: "text" };
        events.push(
          messagesEvent("content_block_start", {
            index: this.open.index,
            content_block: { type: "text", text: "" },
          }),
        );
      }
      events.push(
        messagesEvent("content_block_delta", {
          index: this.open.index,
          delta: { type: "text_delta", text: delta.content },
        }),
      );
    }
    for (const call of delta.toolCalls) {
      if (call.id !== undefined) {
        this.closeBlock(events);
        this.toolUse = true;
        this.open = { index: this.blocks++, kind: "tool_use" };
        events.push(
          messagesEvent("content_block_start", {
            index: this.open.index,
            content_block: {
              type: "tool_use",
              id: toolUseId(call.id),
              name: call.function.name ?? "",
              input: {},
            },
          }),
        );
      }
      const fragment = call.function.arguments;
      if (fragment && this.open?.kind === "tool_use") {
        events.push(
          messagesEvent("content_block_delta", {
            index: this.open.index,
            delta: { type: "input_json_delta", partial_json: fragment },
          }),
        );
      }
    }
    return events;
  }

  /** The open block closed, message_delta with the stop reason and output tokens, message_stop. */
  finish(stopReason: MessagesStopReason, outputTokens: number): string[] {
    const events: string[] = [];
    this.closeBlock(events);
    events.push(
      messagesEvent("message_delta", {
        delta: { stop_reason: this.toolUse ? "tool_use" : stopReason, stop_sequence: null },
        usage: { output_tokens: outputTokens },
      }),
      messagesEvent("message_stop", {}),
    );
    return events;
  }

  private closeBlock(events: string[]): void {
    if (this.open === undefined) return;
    events.push(messagesEvent("content_block_stop", { index: this.open.index }));
    this.open = undefined;
  }
}

/** An error in Anthropic's envelope, as vLLM's Anthropic endpoint answers it (or the end, once headers went out). */
export function sendAnthropicError(res: ServerResponse, error: SimRequestError): void {
  if (res.headersSent) {
    res.end();
    return;
  }
  writeJson(res, error.status, {
    type: "error",
    error: { type: anthropicType(error.status), message: error.message },
  });
}
