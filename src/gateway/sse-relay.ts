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
   * @param metadataEvent the `data: {...x_agent_serve...}\n\n` event to put before `[DONE]`
   * @param stripUsage drop the engine's usage-only chunk (the client did not ask for usage; the gateway did)
   */
  constructor(
    private readonly metadataEvent: Buffer,
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
   * trailing partial event is held until its end arrives.
   */
  push(input: Buffer): Buffer[] {
    const chunk = this.held === undefined ? input : Buffer.concat([this.held, input]);
    this.held = undefined;
    const out: Buffer[] = [];
    let start = 0;
    let passFrom = 0; // events from passFrom to start are forwarded as one slice
    while (start < chunk.length) {
      const end = chunk.indexOf(EVENT_END, start);
      if (end < 0) break;
      const next = end + EVENT_END.length;
      const action = this.classify(chunk, start, end);
      if (action !== "pass") {
        if (start > passFrom) out.push(chunk.subarray(passFrom, start));
        if (action === "done") out.push(this.metadataEvent, chunk.subarray(start, next));
        passFrom = next;
      }
      start = next;
    }
    if (start > passFrom) out.push(chunk.subarray(passFrom, start));
    if (start < chunk.length) this.held = chunk.subarray(start);
    return out;
  }

  /** The engine's stream ended: whatever partial event was held back. */
  flush(): Buffer[] {
    const rest = this.held;
    this.held = undefined;
    return rest === undefined ? [] : [rest];
  }

  private classify(chunk: Buffer, start: number, end: number): "pass" | "done" | "drop" {
    if (!this.done && chunk.compare(DONE, 0, DONE.length, start, Math.min(end, start + DONE.length)) === 0) {
      this.done = true;
      return "done";
    }
    const usageAt = chunk.indexOf(USAGE_OBJECT, start);
    if (usageAt < 0 || usageAt >= end) return "pass";
    const line = chunk.toString("utf8", start, end);
    const payload = line.startsWith("data: ") ? line.slice(6) : line;
    let parsed: unknown;
    try {
      parsed = JSON.parse(payload);
    } catch {
      return "pass";
    }
    this.usageSeen = usageFrom((parsed as { usage?: unknown }).usage) ?? this.usageSeen;
    const usageOnly = chunk.indexOf(EMPTY_CHOICES, start) >= 0 && chunk.indexOf(EMPTY_CHOICES, start) < end;
    return this.stripUsage && usageOnly ? "drop" : "pass";
  }
}

/** One SSE event carrying a JSON payload. */
export function sseEvent(payload: unknown): Buffer {
  return Buffer.from(`data: ${JSON.stringify(payload)}\n\n`);
}
