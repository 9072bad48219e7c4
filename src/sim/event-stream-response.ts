// What the Responses and Anthropic Messages answers share: queued events written in one socket write, one JSON
// answer, the faults that act on an answer under way (hang, cut_stream), and reporting how it ended.
import type { ServerResponse } from "node:http";
import type { ResponseHost } from "./generation-response.js";
import type { EngineRequest } from "./request.js";

export abstract class EventStreamResponse {
  /** Events waiting for the next flush. */
  protected readonly pending: string[] = [];
  protected settled = false;
  private eventsSent = 0;

  constructor(
    protected readonly res: ServerResponse,
    protected readonly host: ResponseHost,
    protected readonly engineRequest: EngineRequest,
  ) {
    res.on("close", () => {
      if (this.settled) return;
      this.settle("aborted");
      host.abort([engineRequest]);
    });
  }

  /** Writes a JSON answer unless a fault intervenes (hang: nothing; cut_stream: half the body, then a reset). */
  protected sendJson(json: string): boolean {
    const res = this.res;
    const fault = this.host.currentFault();
    if (fault.kind === "hang") {
      this.settle("stalled");
      return false;
    }
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(json) });
    if (fault.kind === "cut_stream") {
      this.settle("cut");
      res.write(json.slice(0, Math.floor(json.length / 2)), () => res.destroy());
      return false;
    }
    res.end(json);
    return true;
  }

  /**
   * Writes the queued events in one socket write (ending the response if `end`), unless a fault intervenes:
   * hang stops the stream for good, cut_stream drops the connection after that many events. Returns false then.
   */
  protected flush(end: boolean): boolean {
    const res = this.res;
    if (this.settled || res.destroyed) return false;
    const fault = this.host.currentFault();
    if (fault.kind === "hang") {
      this.pending.length = 0;
      this.settle("stalled");
      this.host.abort([this.engineRequest]);
      return false;
    }
    if (fault.kind === "cut_stream" && this.eventsSent + this.pending.length > fault.afterChunks) {
      const allowed = this.pending.slice(0, Math.max(0, fault.afterChunks - this.eventsSent)).join("");
      this.pending.length = 0;
      this.settle("cut");
      this.host.abort([this.engineRequest]);
      if (allowed.length === 0) res.destroy();
      else res.write(allowed, () => res.destroy());
      return false;
    }
    this.eventsSent += this.pending.length;
    const data = this.pending.join("");
    this.pending.length = 0;
    if (end) res.end(data);
    else if (data.length > 0) res.write(data);
    return true;
  }

  /** A stream's headers go out by the end of this event-loop turn, before any event (as GenerationResponse's). */
  sendHeadersSoon(): void {
    setImmediate(EventStreamResponse.flushHeadersIfUnsent, this);
  }

  /** writeHead was called (a stream), yet no event has carried the headers to the socket: send them alone. */
  private static flushHeadersIfUnsent(response: EventStreamResponse): void {
    const res = response.res;
    if (!response.settled && response.eventsSent === 0 && res.headersSent && !res.destroyed)
      res.flushHeaders();
  }

  protected settle(outcome: "aborted" | "stalled" | "cut"): void {
    if (this.settled) return;
    this.settled = true;
    this.host.recordOutcome(outcome, undefined);
  }
}
