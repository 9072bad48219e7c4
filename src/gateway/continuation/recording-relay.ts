// Wraps the relay of a stream that may be continued: records what the client was sent (transcript.ts), and
// withholds an engine's error event mid-answer (and whatever follows it), so that the attempt treats it as a
// broken stream and another engine can take the answer on. The events are parsed only when the transcript is
// read (a break) or past RECORD_AFTER_BYTES of them: most answers end whole, and then nothing is parsed at all.
import { ByteNeedle } from "../byte-needle.js";
import type { StreamBreak, StreamRelay } from "../stream-relay.js";
import type { TokenUsage } from "../usage.js";
import { dataJson, isRecord, parseEvents } from "./sse-events.js";
import type { AnswerTranscript } from "./transcript.js";

/** Bytes of relayed events kept unparsed, at most: past them they are parsed into the transcript and let go. */
const RECORD_AFTER_BYTES = 64 * 1024;
const ERROR_DATA = new ByteNeedle('data: {"error"', "{");
// By `{` (three per chat chunk) and `v` (no key of a chat chunk or Messages event holds one).
const ERROR_EVENT = new ByteNeedle("event: error\n", "v");

export class RecordingRelay implements StreamRelay {
  stopped: StreamBreak | undefined;
  /** Whole events sent to the client and not yet recorded. */
  private unread: Buffer[] = [];
  private unreadBytes = 0;

  constructor(
    private readonly inner: StreamRelay,
    private readonly transcript: AnswerTranscript,
    private readonly backendId: string,
  ) {}

  get complete(): boolean {
    return this.inner.complete;
  }

  get usage(): TokenUsage | undefined {
    return this.inner.usage;
  }

  get generatedEvents(): number {
    return this.inner.generatedEvents;
  }

  get responseId(): string | undefined {
    return this.inner.responseId;
  }

  push(input: Buffer): Buffer[] {
    if (this.stopped !== undefined) return [];
    const out = this.inner.push(input);
    this.stopped ??= this.inner.stopped;
    if (out.length === 0) return out;
    if (out.some(mayHoldError)) return this.untilError(out);
    for (const bytes of out) {
      this.unread.push(bytes);
      this.unreadBytes += bytes.length;
    }
    if (this.unreadBytes > RECORD_AFTER_BYTES) this.record();
    return out;
  }

  /** Records what the client was sent so far (call before reading the transcript). */
  record(): void {
    if (this.unread.length === 0) return;
    const bytes = Buffer.concat(this.unread, this.unreadBytes);
    this.unread = [];
    this.unreadBytes = 0;
    this.transcript.record(parseEvents(bytes.toString("utf8")));
  }

  /** Output that may hold an engine's error event: what precedes it goes out, it and the rest are withheld. */
  private untilError(out: Buffer[]): Buffer[] {
    this.record();
    const bytes = out.length === 1 ? out[0]! : Buffer.concat(out);
    // The relays hand out whole events only, so the bytes split into events where they end.
    let at = 0;
    for (let end = bytes.indexOf("\n\n"); end >= 0; end = bytes.indexOf("\n\n", at)) {
      const events = parseEvents(bytes.toString("utf8", at, end + 2));
      const error = events.find(isErrorEvent);
      if (error !== undefined) {
        this.stopped = {
          message: `backend ${this.backendId} sent an error event mid-answer: ${errorText(error.data)}`,
          code: "upstream_error",
          engineFault: true,
        };
        return at === 0 ? [] : [bytes.subarray(0, at)];
      }
      this.transcript.record(events);
      at = end + 2;
    }
    return [bytes];
  }

  flush(): Buffer[] {
    return this.inner.flush();
  }

  errorEnding(message: string, code: string): Buffer[] {
    return this.inner.errorEnding(message, code);
  }
}

/** Whether the bytes hold what starts an error event: the check before events are parsed for one. */
function mayHoldError(bytes: Buffer): boolean {
  return ERROR_DATA.in(bytes, 0, bytes.length) >= 0 || ERROR_EVENT.in(bytes, 0, bytes.length) >= 0;
}

function isErrorEvent(event: { name: string | undefined; data: string }): boolean {
  if (event.name === "error") return true;
  if (event.name !== undefined || !event.data.startsWith('{"error"')) return false;
  return isRecord(dataJson(event));
}

function errorText(data: string): string {
  try {
    const parsed = JSON.parse(data) as { error?: { message?: unknown } };
    const message = parsed.error?.message;
    return typeof message === "string" ? message : "an error";
  } catch {
    return "an error";
  }
}
