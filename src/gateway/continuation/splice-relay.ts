// The relay of a continuation: reads the next engine's stream event by event and hands the client only what
// carries its answer on, rewritten into the ids, indexes and usage of the stream the client already holds.
import type { StreamBreak, StreamReceipt, StreamRelay } from "../stream-relay.js";
import type { TokenUsage } from "../usage.js";
import { parseEvents, type SseEvent } from "./sse-events.js";

const EVENT_END = Buffer.from("\n\n");

/** What every continuation relay takes besides its API's transcript. */
export interface SpliceOptions {
  /** The engine continuing the answer (for the error texts). */
  backendId: string;
  /** `x_agent_serve` of this attempt (with `migrated`), put on the event that ends the answer. */
  meta: Record<string, unknown>;
  receipt?: StreamReceipt | undefined;
}

/** The events of this API's stream one at a time: what goes to the client for each (nothing: undefined). */
export abstract class SpliceRelay implements StreamRelay {
  private held: Buffer | undefined;
  protected ended = false;
  stopped: StreamBreak | undefined;
  protected clientUsage: TokenUsage | undefined;
  /** Generation events passed on (the earlier engines' ones included). */
  protected generated: number;

  constructor(
    protected readonly options: SpliceOptions,
    relayedBefore: number,
  ) {
    this.generated = relayedBefore;
  }

  get complete(): boolean {
    return this.ended;
  }

  get usage(): TokenUsage | undefined {
    return this.clientUsage;
  }

  get generatedEvents(): number {
    return this.generated;
  }

  readonly responseId = undefined;

  push(input: Buffer): Buffer[] {
    if (this.stopped !== undefined) return [];
    // Bytes, not text, until an event is whole: a character's bytes may be split between two reads.
    const chunk = this.held === undefined ? input : Buffer.concat([this.held, input]);
    const end = chunk.lastIndexOf(EVENT_END);
    this.held = end < 0 ? chunk : end + 2 < chunk.length ? chunk.subarray(end + 2) : undefined;
    if (end < 0) return [];
    const out: Buffer[] = [];
    for (const event of parseEvents(chunk.toString("utf8", 0, end + 2))) {
      const written = this.ended ? undefined : this.splice(event);
      if (this.stopped !== undefined) break;
      if (written !== undefined) out.push(written);
    }
    return out;
  }

  flush(): Buffer[] {
    this.held = undefined;
    return [];
  }

  abstract errorEnding(message: string, code: string): Buffer[];

  /** The client's version of one event of the engine's stream; undefined to drop it. */
  protected abstract splice(event: SseEvent): Buffer | undefined;

  /** Stops the stream: the rest of this engine's answer cannot reach the client as it is. */
  protected stop(message: string, engineFault: boolean): undefined {
    this.stopped ??= { message, code: "upstream_error", engineFault };
    return undefined;
  }

  /** `x_agent_serve` for the answer's last event: the attempt's metadata, and the receipt once usage is known. */
  protected finalMeta(): Record<string, unknown> {
    const usage = this.clientUsage;
    const receipt = usage === undefined ? undefined : this.options.receipt?.(usage);
    return receipt === undefined ? this.options.meta : { ...this.options.meta, ...receipt };
  }
}

/** The metadata object inside a member `,"x_agent_serve":{...}` (as metadataMember writes it). */
export function metaOfMember(member: Buffer): Record<string, unknown> {
  const parsed = JSON.parse(`{${member.subarray(1).toString("utf8")}}`) as {
    x_agent_serve: Record<string, unknown>;
  };
  return parsed.x_agent_serve;
}

/**
 * The usage of a continued answer as the client counts it: the engine counted the prefill (the answer so far) as
 * prompt, the client's answer counts it as completion; the cached part is at most the prompt.
 */
export function rebasedUsage(engine: TokenUsage, prefillTokens: number): TokenUsage {
  const promptTokens = Math.max(0, engine.promptTokens - prefillTokens);
  return {
    promptTokens,
    completionTokens: engine.completionTokens + prefillTokens,
    cachedTokens: Math.min(engine.cachedTokens, promptTokens),
  };
}
