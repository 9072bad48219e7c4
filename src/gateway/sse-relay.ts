// Relays an engine's SSE stream event by event: splices the metadata into the engine's first chunk, reads
// the usage chunk, and drops it when only the gateway asked for it.
import { ByteNeedle } from "./byte-needle.js";
import { receiptMembers, spliceMemberIntoJson } from "./response-metadata.js";
import type { StreamReceipt, StreamRelay } from "./stream-relay.js";
import { usageFrom, type TokenUsage } from "./usage.js";

// Each found by a byte that a chunk's JSON holds at most once (byte-needle.ts says why): no key of a chunk
// holds an upper-case N, "logprobs" is the only one with a g, and `]` ends its choices.
const DONE = new ByteNeedle("data: [DONE]", "N");
const USAGE_OBJECT = new ByteNeedle('"usage":{', "g");
const EMPTY_CHOICES = new ByteNeedle('"choices":[]', "]");
const EVENT_END = new ByteNeedle("\n\n", "\n");
const DATA_PREFIX = Buffer.from("data: ");
const DONE_EVENT = Buffer.from("data: [DONE]\n\n");
const BLANK_LINE = Buffer.from("\n\n");

/** Chat and text completion streams: `data: {chunk}` events ended by `data: [DONE]`. */
export class SseRelay implements StreamRelay {
  private held: Buffer | undefined;
  private done = false;
  private usageSeen: TokenUsage | undefined;
  private generated = 0;
  /** The metadata member still to be spliced into a chunk; undefined once it rode on one. */
  private member: Buffer | undefined;
  /** The metadata member, kept for the usage chunk (which gets it again, with the receipt). */
  private readonly fullMember: Buffer;

  /**
   * @param member `,"x_agent_serve":{...}`, spliced into the first data chunk the engine sends (never an extra
   *   chunk: clients that read `choices[0]` of every chunk, or the last chunk's id and usage, see only the
   *   engine's chunks, ids and order)
   * @param stripUsage drop the engine's usage-only chunk (the client did not ask for usage; the gateway did)
   * @param receipt the route receipt, spliced as `x_agent_serve` into the usage chunk when it reaches the client
   */
  constructor(
    member: Buffer,
    private readonly stripUsage: boolean,
    private readonly receipt?: StreamReceipt,
  ) {
    this.member = member;
    this.fullMember = member;
  }

  /** True once the engine's `[DONE]` went through. */
  get complete(): boolean {
    return this.done;
  }

  readonly responseId = undefined;

  errorEnding(message: string, code: string): Buffer[] {
    const error = sseEvent({ error: { message, type: "upstream_error", param: null, code } });
    return [error, ...(this.done ? [] : this.push(DONE_EVENT))];
  }

  /** The usage the engine reported, if it did. */
  get usage(): TokenUsage | undefined {
    return this.usageSeen;
  }

  /** Data chunks relayed, [DONE] and usage-only chunks aside: vLLM sends one per generated token and choice. */
  get generatedEvents(): number {
    return this.generated;
  }

  /**
   * Returns what to write now. Complete events pass through as slices of the engine's own buffers; only a
   * trailing partial event is held until its end arrives (and, until the metadata has ridden on a chunk, the
   * first event's). Only a few kinds of event need a look (the first data chunk, the first `data: [DONE]`,
   * those carrying usage), so the chunk is searched for those rather than split into every event: a short
   * answer arrives as one read of twenty events, which then costs a handful of native searches.
   */
  push(input: Buffer): Buffer[] {
    const chunk = this.held === undefined ? input : Buffer.concat([this.held, input]);
    this.held = undefined;
    const lastEnd = chunk.lastIndexOf(BLANK_LINE);
    const complete = lastEnd < 0 ? 0 : lastEnd + EVENT_END.length; // [0, complete) holds whole events
    if (complete < chunk.length) this.held = chunk.subarray(complete);
    if (!this.done) this.countGenerated(chunk, complete);
    const out: Buffer[] = [];
    let from = 0;
    while (this.member !== undefined && from < complete) {
      const end = EVENT_END.in(chunk, from, complete) + EVENT_END.length;
      const spliced = this.spliceInto(chunk, from, end);
      if (spliced !== undefined) out.push(spliced);
      else this.scan(chunk, from, end, out);
      from = end;
    }
    this.scan(chunk, from, complete, out);
    return out;
  }

  /**
   * The event at [start, end) with the metadata spliced in, if it is a data chunk holding a JSON object that
   * goes to the client (not `[DONE]`, not a usage chunk to drop); undefined otherwise.
   */
  private spliceInto(chunk: Buffer, start: number, end: number): Buffer | undefined {
    if (chunk.compare(DATA_PREFIX, 0, DATA_PREFIX.length, start, start + DATA_PREFIX.length) !== 0)
      return undefined;
    const payloadEnd = end - EVENT_END.length;
    const usageAt = USAGE_OBJECT.in(chunk, start, payloadEnd);
    if (usageAt >= 0 && this.readUsage(chunk, start, payloadEnd) === "drop") return undefined;
    const payload = chunk.subarray(start + DATA_PREFIX.length, payloadEnd);
    const spliced = spliceMemberIntoJson(payload, this.member!);
    if (spliced === undefined) return undefined;
    this.member = undefined;
    return Buffer.concat([DATA_PREFIX, spliced, BLANK_LINE]);
  }

  /** Appends to `out` the events of chunk[start, end): passed through, `[DONE]` noted, usage read or dropped. */
  private scan(chunk: Buffer, start: number, end: number, out: Buffer[]): void {
    let passFrom = start; // bytes from passFrom on are forwarded as one slice
    if (!this.done && findDone(chunk, start, end) >= 0) this.done = true;
    let usageAt = USAGE_OBJECT.in(chunk, start, end);
    while (usageAt >= 0) {
      const eventAt = eventStart(chunk, usageAt, start);
      const eventEnd = EVENT_END.in(chunk, usageAt, chunk.length);
      if (this.readUsage(chunk, eventAt, eventEnd) === "drop") {
        if (eventAt > passFrom) out.push(chunk.subarray(passFrom, eventAt));
        passFrom = eventEnd + EVENT_END.length;
      } else {
        const receipt = this.receiptEvent(chunk, eventAt, eventEnd);
        if (receipt !== undefined) {
          if (eventAt > passFrom) out.push(chunk.subarray(passFrom, eventAt));
          out.push(receipt);
          passFrom = eventEnd; // its blank line passes with what follows
        }
      }
      usageAt = USAGE_OBJECT.in(chunk, eventEnd, end);
    }
    if (end > passFrom) out.push(chunk.subarray(passFrom, end));
  }

  /**
   * The usage event at [start, end) with the whole metadata and the receipt spliced in, if there is a receipt:
   * a client that keeps the last `x_agent_serve` it saw still has every field.
   */
  private receiptEvent(chunk: Buffer, start: number, end: number): Buffer | undefined {
    if (this.receipt === undefined || this.usageSeen === undefined) return undefined;
    const fields = this.receipt(this.usageSeen);
    if (fields === undefined) return undefined;
    if (chunk.compare(DATA_PREFIX, 0, DATA_PREFIX.length, start, start + DATA_PREFIX.length) !== 0)
      return undefined;
    const payload = chunk.subarray(start + DATA_PREFIX.length, end);
    const member = Buffer.concat([
      this.fullMember.subarray(0, this.fullMember.length - 1),
      Buffer.from(`,${receiptMembers(fields)}}`),
    ]);
    const spliced = spliceMemberIntoJson(payload, member);
    return spliced === undefined ? undefined : Buffer.concat([DATA_PREFIX, spliced]);
  }

  /** Adds the generation events of chunk[0, complete): every event, less usage-only ones and `[DONE]`. */
  private countGenerated(chunk: Buffer, complete: number): void {
    let events = 0;
    for (let at = EVENT_END.in(chunk, 0, complete); at >= 0; at = EVENT_END.in(chunk, at + 2, complete))
      events++;
    for (
      let at = EMPTY_CHOICES.in(chunk, 0, complete);
      at >= 0;
      at = EMPTY_CHOICES.in(chunk, at + 1, complete)
    )
      events--;
    if (findDone(chunk, 0, complete) >= 0) events--;
    this.generated += Math.max(0, events);
  }

  /** The engine's stream ended: whatever partial event was held back. */
  flush(): Buffer[] {
    const rest = this.held;
    this.held = undefined;
    return rest === undefined ? [] : [rest];
  }

  /** Reads the usage of the event at [start, end); says whether to drop it (usage-only, client did not ask). */
  private readUsage(chunk: Buffer, start: number, end: number): "pass" | "drop" {
    const line = chunk.toString("utf8", start, end);
    const payload = line.startsWith("data: ") ? line.slice(6) : line;
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload);
    } catch {
      return "pass";
    }
    this.usageSeen = usageFrom((parsed as { usage?: unknown }).usage) ?? this.usageSeen;
    const usageOnly = EMPTY_CHOICES.in(chunk, start, end) >= 0;
    return this.stripUsage && usageOnly ? "drop" : "pass";
  }
}

/** Where the event holding byte `at` starts: just after the previous blank line, or at `floor`. */
function eventStart(chunk: Buffer, at: number, floor: number): number {
  const previousEnd = chunk.lastIndexOf(BLANK_LINE, at);
  return previousEnd < floor ? floor : previousEnd + EVENT_END.length;
}

/** The first event in chunk[from, before) that is `data: [DONE]`; the text inside another event does not count. */
function findDone(chunk: Buffer, from: number, before: number): number {
  for (let at = DONE.in(chunk, from, before); at >= 0; at = DONE.in(chunk, at + 1, before)) {
    if (at === from || (chunk[at - 1] === 0x0a && chunk[at - 2] === 0x0a)) return at;
  }
  return -1;
}

/** One SSE event carrying a JSON payload. */
export function sseEvent(payload: unknown): Buffer {
  return Buffer.from(`data: ${JSON.stringify(payload)}\n\n`);
}
