// Carries one Anthropic Messages request's engine sequence to the client: Anthropic's event stream as tokens
// arrive (message_start, content blocks, message_delta, message_stop), or one message object.
import type { ServerResponse } from "node:http";
import type { RequestListener } from "./engine-loop.js";
import { EventStreamResponse } from "./event-stream-response.js";
import type { ResponseHost } from "./generation-response.js";
import {
  messageBody,
  messageId,
  MessagesEventStream,
  messagesStopReason,
  messagesUsage,
  toolUseId,
  type MessagesContentBlock,
} from "../surface/messages-shapes.js";
import { usage as chatUsage } from "../surface/openai-shapes.js";
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

export class MessagesResponse extends EventStreamResponse implements RequestListener {
  private readonly identity: { id: string; model: string };
  private readonly events: MessagesEventStream;
  private readonly streamer: ToolCallStreamer | undefined;

  constructor(private readonly options: MessagesResponseOptions) {
    super(options.res, options.host, options.engineRequest);
    this.identity = { id: messageId(), model: options.model };
    this.events = new MessagesEventStream(this.identity);
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
    if (delta) this.pending.push(...this.events.delta(delta));
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
    const finishReason = request.plannedFinishReason === "length" ? "length" : "stop";
    const stopReason = messagesStopReason(finishReason, this.options.toolPlan !== undefined);
    if (this.options.stream) {
      this.start(request);
      this.pending.push(...this.events.finish(stopReason, request.numOutputTokens));
      if (!this.flush(true)) return;
    } else {
      const body = messageBody(
        this.identity,
        this.wholeContent(request.outputTexts.join("")),
        stopReason,
        messagesUsage(this.options.promptTokens, cached, request.numOutputTokens),
      );
      if (!this.sendJson(body)) return;
    }
    this.settled = true;
    this.options.host.recordOutcome(
      "served",
      chatUsage(this.options.promptTokens, request.numOutputTokens, cached),
    );
  }

  /** message_start, once, with the prompt's cached part (known once the prompt was prefilled). */
  private start(request: EngineRequest): void {
    this.pending.push(...this.events.start(this.options.promptTokens, request.numCachedTokens ?? 0));
  }

  private wholeContent(text: string): MessagesContentBlock[] {
    const plan = this.options.toolPlan;
    const parsed = plan ? parseToolOutput(plan, text) : { content: text, calls: [] };
    const content: MessagesContentBlock[] = [];
    if (parsed.content) content.push({ type: "text", text: parsed.content });
    for (const call of parsed.calls) {
      content.push({
        type: "tool_use",
        id: toolUseId(call.id),
        name: call.name,
        input: JSON.parse(call.arguments),
      });
    }
    return content;
  }
}
