// Anthropic Messages continuations: the next engine's message_start is dropped (the client has its message and
// prompt usage); its text goes on in the client's open text block; a cut tool_use block is restarted
// (regenerated-call.ts) under the client's block index; new blocks take the next indexes; message_delta gets the
// rebased output usage and x_agent_serve (with `migrated`).
import { usageFrom } from "../usage.js";
import { RegeneratedCall } from "./regenerated-call.js";
import { dataJson, formatEvent, isRecord, type SseEvent } from "./sse-events.js";
import { SpliceRelay, type SpliceOptions } from "./splice-relay.js";
import type { MessagesTranscript, ToolCallSoFar } from "./transcript.js";

export class MessagesSpliceRelay extends SpliceRelay {
  private readonly relayedCalls: readonly ToolCallSoFar[];
  /** The client's text block the continued text goes on in, if the cut came inside one. */
  private readonly openText: number | undefined;
  /** The next engine's block index -> the client's. */
  private readonly indexes = new Map<number, number>();
  /** The next engine's block index -> the relayed call it regenerates. */
  private readonly regenerated = new Map<number, RegeneratedCall>();
  /** Blocks the client already closed: their regenerated stop is not sent again. */
  private readonly closedForClient = new Set<number>();
  private nextIndex: number;
  private toolUses = 0;
  private readonly prefillTokens: number;

  constructor(
    private readonly transcript: MessagesTranscript,
    options: SpliceOptions,
  ) {
    super(options, transcript.textEvents + transcript.calls.length);
    this.relayedCalls = transcript.calls.map((call) => ({ ...call }));
    this.openText = transcript.openTextIndex;
    this.nextIndex = transcript.blocks.length;
    this.prefillTokens = transcript.textEvents;
  }

  errorEnding(message: string): Buffer[] {
    return [formatEvent("error", { type: "error", error: { type: "api_error", message } })];
  }

  protected splice(event: SseEvent): Buffer | undefined {
    const data = dataJson(event);
    if (!isRecord(data)) return formatEvent(event.name, event.data);
    switch (event.name) {
      case "message_start":
        return undefined;
      case "content_block_start":
        return this.startBlock(data);
      case "content_block_delta":
        return this.delta(data);
      case "content_block_stop":
        return this.stopBlock(data);
      case "message_delta":
        return this.messageDelta(data);
      case "message_stop":
        this.ended = true;
        return formatEvent(event.name, data);
      case "error": {
        const error = data["error"];
        const what = isRecord(error) && typeof error["message"] === "string" ? error["message"] : "an error";
        return this.stop(`backend ${this.options.backendId} sent an error event mid-answer: ${what}`, true);
      }
      default:
        return formatEvent(event.name, data);
    }
  }

  private startBlock(data: Record<string, unknown>): Buffer | undefined {
    const index = data["index"];
    const block = data["content_block"];
    if (typeof index !== "number" || !isRecord(block)) return formatEvent("content_block_start", data);
    const openText = this.indexes.size === 0 ? this.openText : undefined;
    if (block["type"] === "text" && openText !== undefined) {
      // The text goes on in the client's open block: its start was sent long ago.
      this.indexes.set(index, openText);
      return undefined;
    }
    // The client's open text block gets no more text: it is closed before the next block starts.
    const closeOpen =
      openText === undefined
        ? []
        : [formatEvent("content_block_stop", { type: "content_block_stop", index: openText })];
    const started = this.startOther(index, data, block);
    return closeOpen.length === 0
      ? started
      : Buffer.concat([...closeOpen, ...(started === undefined ? [] : [started])]);
  }

  private startOther(
    index: number,
    data: Record<string, unknown>,
    block: Record<string, unknown>,
  ): Buffer | undefined {
    if (block["type"] === "tool_use") {
      const relayed = this.relayedCalls[this.toolUses++];
      if (relayed !== undefined) {
        const regenerated = new RegeneratedCall(relayed);
        regenerated.named(typeof block["name"] === "string" ? block["name"] : "");
        if (regenerated.diverged !== undefined) return this.diverged(regenerated.diverged);
        this.regenerated.set(index, regenerated);
        this.indexes.set(index, relayed.index);
        if (relayed.closed) this.closedForClient.add(relayed.index);
        return undefined;
      }
      if (!this.callsDone()) return undefined;
    }
    const mapped = this.nextIndex++;
    this.indexes.set(index, mapped);
    return formatEvent("content_block_start", { ...data, index: mapped });
  }

  private delta(data: Record<string, unknown>): Buffer | undefined {
    const index = typeof data["index"] === "number" ? data["index"] : -1;
    const mapped = this.indexes.get(index) ?? index;
    const delta = isRecord(data["delta"]) ? data["delta"] : {};
    const regenerated = this.regenerated.get(index);
    if (regenerated !== undefined && delta["type"] === "input_json_delta") {
      const rest = regenerated.next(typeof delta["partial_json"] === "string" ? delta["partial_json"] : "");
      if (regenerated.diverged !== undefined) return this.diverged(regenerated.diverged);
      if (rest === "") return undefined;
      this.generated++;
      return formatEvent("content_block_delta", {
        ...data,
        index: mapped,
        delta: { ...delta, partial_json: rest },
      });
    }
    this.generated++;
    return formatEvent("content_block_delta", { ...data, index: mapped });
  }

  private stopBlock(data: Record<string, unknown>): Buffer | undefined {
    const index = typeof data["index"] === "number" ? data["index"] : -1;
    const mapped = this.indexes.get(index) ?? index;
    const regenerated = this.regenerated.get(index);
    if (regenerated !== undefined) {
      regenerated.end();
      if (regenerated.diverged !== undefined) return this.diverged(regenerated.diverged);
      if (this.closedForClient.has(mapped)) return undefined;
    }
    return formatEvent("content_block_stop", { ...data, index: mapped });
  }

  private messageDelta(data: Record<string, unknown>): Buffer | undefined {
    if (!this.callsDone()) return undefined;
    const usage = isRecord(data["usage"]) ? data["usage"] : {};
    const output = typeof usage["output_tokens"] === "number" ? usage["output_tokens"] : 0;
    const start = usageFrom(this.transcript.startUsage);
    const completion = output + this.prefillTokens;
    this.clientUsage = {
      promptTokens: start?.promptTokens ?? 0,
      completionTokens: completion,
      cachedTokens: start?.cachedTokens ?? 0,
    };
    const delta = formatEvent("message_delta", {
      ...data,
      usage: { ...usage, output_tokens: completion },
      x_agent_serve: this.finalMeta(),
    });
    if (this.indexes.size > 0 || this.openText === undefined) return delta;
    // The continuation added nothing: the client's open text block still needs its end.
    return Buffer.concat([
      formatEvent("content_block_stop", { type: "content_block_stop", index: this.openText }),
      delta,
    ]);
  }

  /** Every tool_use block the client holds was regenerated (whole, or past its cut); else the stream stops. */
  private callsDone(): boolean {
    if (this.toolUses < this.relayedCalls.length) {
      const missing = this.relayedCalls[this.toolUses]!;
      this.diverged(`the continuation did not call '${missing.name}' again`);
      return false;
    }
    for (const regenerated of this.regenerated.values()) {
      regenerated.end();
      if (regenerated.diverged !== undefined) {
        this.diverged(regenerated.diverged);
        return false;
      }
    }
    return true;
  }

  private diverged(why: string): undefined {
    return this.stop(
      `the answer was continued on backend ${this.options.backendId}, but ${why}; the answer is incomplete`,
      false,
    );
  }
}
