// Relays an engine's SSE stream event by event: splices the metadata chunk before `data: [DONE]`, reads
// the usage chunk, and drops it when only the gateway asked for it.
import { usageFrom, type TokenUsage } from "./usage.js";

const DONE = Buffer.from("data: [DONE]");
const USAGE_OBJECT = Buffer.from('"usage":{');
const EMPTY_CHOICES = Buffer.from('"choices":[]');
const EVENT_END = Buffer.from("\n\n");

export class SseRelay {
  private held: Buffer | undefined;
  private done = false;
  private usageSeen: TokenUsage | undefined;

  /**
   * @param metadataEvent makes the `data: {...x_agent_serve...}\n\n` event to put before `[DONE]` (built
   *   only then, so that it costs the first token nothing)
   * @param stripUsage drop the engine's usage-only chunk (the client did not ask for usage; the gateway did)
   */
  constructor(
    private readonly metadataEvent: () => Buffer,
    private readonly stripUsage: boolean,
  ) {}

  /** True once the engine's `[DONE]` went through (with the metadata before it). */
  get sawDone(): boolean {
    return this.done;
  }

  /** The usage the engine reported, if it did. */
  get usage(): TokenUsage | undefined {
    return this.usageSeen;
  }

  /**
   * Returns what to write now. Complete events pass through as slices of the engine's own buffers; only a
   * trailing partial event is held until its end arrives. Only two kinds of event need a look (the first
   * `data: [DONE]` and those carrying usage), so the chunk is searched for those rather than split into
   * every event: a short answer arrives as one read of twenty events, which then costs a handful of native
   * searches instead of two per event.
   */
  push(input: Buffer): Buffer[] {
    const chunk = this.held === undefined ? input : Buffer.concat([this.held, input]);
    this.held = undefined;
    const lastEnd = chunk.lastIndexOf(EVENT_END);
    const complete = lastEnd < 0 ? 0 : lastEnd + EVENT_END.length; // [0, complete) holds whole events
    if (complete < chunk.length) this.held = chunk.subarray(complete);
    const out: Buffer[] = [];
    let passFrom = 0; // bytes from passFrom on are forwarded as one slice
    let doneAt = this.done ? -1 : findDone(chunk, complete);
    let usageAt = find(chunk, USAGE_OBJECT, 0, complete);
    while (doneAt >= 0 || usageAt >= 0) {
      if (doneAt >= 0 && (usageAt < 0 || doneAt < usageAt)) {
        const next = chunk.indexOf(EVENT_END, doneAt) + EVENT_END.length;
        if (doneAt > passFrom) out.push(chunk.subarray(passFrom, doneAt));
        out.push(this.metadataEvent(), chunk.subarray(doneAt, next));
        passFrom = next;
        this.done = true;
        doneAt = -1;
      } else {
        const start = eventStart(chunk, usageAt);
        const end = chunk.indexOf(EVENT_END, usageAt);
        if (this.readUsage(chunk, start, end) === "drop") {
          if (start > passFrom) out.push(chunk.subarray(passFrom, start));
          passFrom = end + EVENT_END.length;
        }
        usageAt = find(chunk, USAGE_OBJECT, end, complete);
      }
    }
    if (complete > passFrom) out.push(chunk.subarray(passFrom, complete));
    return out;
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
    const choicesAt = chunk.indexOf(EMPTY_CHOICES, start);
    const usageOnly = choicesAt >= 0 && choicesAt < end;
    return this.stripUsage && usageOnly ? "drop" : "pass";
  }
}

/** The first `needle` in chunk[from, before), or -1. */
function find(chunk: Buffer, needle: Buffer, from: number, before: number): number {
  const at = chunk.indexOf(needle, from);
  return at < before ? at : -1;
}

/** Where the event holding byte `at` starts: just after the previous blank line, or at 0. */
function eventStart(chunk: Buffer, at: number): number {
  const previousEnd = chunk.lastIndexOf(EVENT_END, at);
  return previousEnd < 0 ? 0 : previousEnd + EVENT_END.length;
}

/** The first event in chunk[0, before) that is `data: [DONE]`; the text inside another event does not count. */
function findDone(chunk: Buffer, before: number): number {
  for (let at = find(chunk, DONE, 0, before); at >= 0; at = find(chunk, DONE, at + 1, before)) {
    if (at === 0 || (chunk[at - 1] === 0x0a && chunk[at - 2] === 0x0a)) return at;
  }
  return -1;
}

/** One SSE event carrying a JSON payload. */
export function sseEvent(payload: unknown): Buffer {
  return Buffer.from(`data: ${JSON.stringify(payload)}\n\n`);
}
