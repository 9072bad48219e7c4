// Writes one real-engine generation as an Anthropic Messages answer: the event stream as text arrives, or one
// message object. The shapes are the simulator's (src/sim/messages-shapes.ts), so clients see the same answers.
import type { ServerResponse } from "node:http";
import {
  messageBody,
  messageId,
  MessagesEventStream,
  messagesStopReason,
  messagesUsage,
  type MessageIdentity,
} from "../surface/messages-shapes.js";
import type { FinishedGeneration } from "./llama-engine.js";

export class EngineMessagesAnswer {
  private readonly identity: MessageIdentity;
  private readonly events: MessagesEventStream;

  constructor(
    private readonly res: ServerResponse,
    model: string,
    private readonly stream: boolean,
    private readonly promptTokens: number,
  ) {
    this.identity = { id: messageId(), model };
    this.events = new MessagesEventStream(this.identity);
    if (stream) {
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
      res.flushHeaders();
    }
  }

  /** The prompt is evaluated: message_start goes out with its cached part. */
  firstToken(cachedTokens: number): void {
    if (this.stream) this.write(this.events.start(this.promptTokens, cachedTokens));
  }

  text(text: string): void {
    if (this.stream) this.write(this.events.delta({ content: text, toolCalls: [] }));
  }

  /** The end of a generation that was not aborted: message_delta and message_stop, or the whole message. */
  finish(result: FinishedGeneration): void {
    const stopReason = messagesStopReason(result.finishReason, false);
    if (this.stream) {
      const events = [
        ...this.events.start(this.promptTokens, result.cachedTokens),
        ...this.events.finish(stopReason, result.completionTokens),
      ];
      this.res.end(events.join(""));
      return;
    }
    const content = result.text.length > 0 ? [{ type: "text" as const, text: result.text }] : [];
    const usage = messagesUsage(result.promptTokens, result.cachedTokens, result.completionTokens);
    const body = messageBody(this.identity, content, stopReason, usage);
    this.res.writeHead(200, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
    });
    this.res.end(body);
  }

  private write(events: string[]): void {
    if (events.length > 0) this.res.write(events.join(""));
  }
}
