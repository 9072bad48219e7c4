// Carries one Anthropic Messages request's engine sequence to the client: Anthropic's event stream as tokens
// arrive (message_start, content blocks, message_delta, message_stop), or one message object.
import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import type { RequestListener } from "./engine-loop.js";
import { EventStreamResponse } from "./event-stream-response.js";
import type { ResponseHost } from "./generation-response.js";
import { usage as chatUsage } from "./openai-shapes.js";
import type { EngineRequest } from "./request.js";
import { parseToolOutput, ToolCallStreamer, type StreamDelta, type ToolCallPlan } from "./tool-calls.js";

export interface MessagesResponseOptions {
  res: ServerResponse;
  host: ResponseHost;
  model: string;
  stream: boolean;
  engineRequest: EngineRequest;
  toolPlan: ToolCallPlan | undefined;
  promptTokens: number;
}

type ContentBlock =
  { type: "text"; text: string } | { type: "tool_use"; id: string; name: string; input: unknown };

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

function event(type: string, data: Record<string, unknown>): string {
  return `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
}

function toolId(callId: string | undefined): string {
  return `toolu_${(callId ?? randomUUID()).replace(/[^A-Za-z0-9]/g, "").slice(-24)}`;
}

export class MessagesResponse extends EventStreamResponse implements RequestListener {
  private readonly id = `msg_${randomUUID().replaceAll("-", "")}`;
  private readonly streamer: ToolCallStreamer | undefined;
  private started = false;
  /** The index of the content block being streamed, and its kind; undefined when none is open. */
  private open: { index: number; kind: "text" | "tool_use" } | undefined;
  private blocks = 0;
  private sawToolUse = false;

  constructor(private readonly options: MessagesResponseOptions) {
    super(options.res, options.host, options.engineRequest);
    if (options.toolPlan) this.streamer = new ToolCallStreamer(options.toolPlan);
    if (options.stream) {
      options.res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
      });
    }
  }

  onToken(request: EngineRequest, tokenIndex: number): void {
    if (this.settled || !this.options.stream) return;
    this.start(request);
    const text = request.outputTexts[tokenIndex] as string;
    const delta: StreamDelta | undefined = this.streamer
      ? this.streamer.push(text)
      : text.length > 0
        ? { content: text, toolCalls: [] }
        : undefined;
    if (delta) this.apply(delta);
    this.flush(false);
  }

  onFinish(request: EngineRequest): void {
    if (this.settled) return;
    if (request.finishReason === "abort") {
      this.pending.length = 0;
      this.settle("aborted");
      this.options.res.destroy();
      return;
    }
    const cached = request.numCachedTokens ?? 0;
    const stopReason =
      request.plannedFinishReason === "length"
        ? "max_tokens"
        : this.options.toolPlan
          ? "tool_use"
          : "end_turn";
    if (this.options.stream) {
      this.start(request);
      this.closeBlock();
      this.pending.push(
        event("message_delta", {
          delta: { stop_reason: this.sawToolUse ? "tool_use" : stopReason, stop_sequence: null },
          usage: { output_tokens: request.numOutputTokens },
        }),
        event("message_stop", {}),
      );
      if (!this.flush(true)) return;
    } else {
      const body = JSON.stringify({
        id: this.id,
        type: "message",
        role: "assistant",
        model: this.options.model,
        content: this.wholeContent(request.outputTexts.join("")),
        stop_reason: stopReason,
        stop_sequence: null,
        usage: messagesUsage(this.options.promptTokens, cached, request.numOutputTokens),
      });
      if (!this.sendJson(body)) return;
    }
    this.settled = true;
    this.options.host.recordOutcome(
      "served",
      chatUsage(this.options.promptTokens, request.numOutputTokens, cached),
    );
  }

  /** message_start, once: its usage carries the prompt's cached part, known once the prompt was prefilled. */
  private start(request: EngineRequest): void {
    if (this.started) return;
    this.started = true;
    this.pending.push(
      event("message_start", {
        message: {
          id: this.id,
          type: "message",
          role: "assistant",
          model: this.options.model,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: messagesUsage(this.options.promptTokens, request.numCachedTokens ?? 0, 0),
        },
      }),
    );
  }

  private wholeContent(text: string): ContentBlock[] {
    const plan = this.options.toolPlan;
    const parsed = plan ? parseToolOutput(plan, text) : { content: text, calls: [] };
    const content: ContentBlock[] = [];
    if (parsed.content) content.push({ type: "text", text: parsed.content });
    for (const call of parsed.calls) {
      content.push({
        type: "tool_use",
        id: toolId(call.id),
        name: call.name,
        input: JSON.parse(call.arguments),
      });
    }
    return content;
  }

  private apply(delta: StreamDelta): void {
    if (delta.content !== undefined && delta.content.length > 0) {
      if (this.open?.kind !== "text") {
        this.closeBlock();
        this.open = { index: this.blocks++, kind: "text" };
        this.pending.push(
          event("content_block_start", { index: this.open.index, content_block: { type: "text", text: "" } }),
        );
      }
      this.pending.push(
        event("content_block_delta", {
          index: this.open.index,
          delta: { type: "text_delta", text: delta.content },
        }),
      );
    }
    for (const call of delta.toolCalls) {
      if (call.id !== undefined) {
        this.closeBlock();
        this.sawToolUse = true;
        this.open = { index: this.blocks++, kind: "tool_use" };
        this.pending.push(
          event("content_block_start", {
            index: this.open.index,
            content_block: {
              type: "tool_use",
              id: toolId(call.id),
              name: call.function.name ?? "",
              input: {},
            },
          }),
        );
      }
      const fragment = call.function.arguments;
      if (fragment && this.open?.kind === "tool_use") {
        this.pending.push(
          event("content_block_delta", {
            index: this.open.index,
            delta: { type: "input_json_delta", partial_json: fragment },
          }),
        );
      }
    }
  }

  private closeBlock(): void {
    if (this.open === undefined) return;
    this.pending.push(event("content_block_stop", { index: this.open.index }));
    this.open = undefined;
  }
}
