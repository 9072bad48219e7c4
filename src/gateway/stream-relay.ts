// What the attempt needs of a stream relay, whichever API's event stream it relays.
import type { ReceiptFields } from "./response-metadata.js";
import type { TokenUsage } from "./usage.js";

/** The route receipt given the engine's usage (src/receipts): a relay puts it in the event that ends the stream. */
export type StreamReceipt = (usage: TokenUsage, responseId?: string) => ReceiptFields | undefined;

/** A stream that broke after bytes reached the client: why, in the gateway's words, and the library's cause. */
export interface StreamBreak {
  message: string;
  code: string;
  /** The engine broke it (not the client, the deadline or a shutdown): a failure for its health. */
  engineFault: boolean;
  /** The library error behind it, for the log. */
  cause?: string | undefined;
}

export interface StreamRelay {
  /** What to write to the client now, given the engine's next read. */
  push(input: Buffer): Buffer[];
  /** The engine's stream ended: whatever partial event was held back. */
  flush(): Buffer[];
  /** True once the stream's own end went by (`[DONE]`, or the Responses API's final event). */
  readonly complete: boolean;
  /** The usage the engine reported, if it did. */
  readonly usage: TokenUsage | undefined;
  /**
   * Generation events relayed so far (chat/completions chunks, Responses API deltas), about one token each:
   * what a stream that ends before the engine's usage is charged (admit.ts, streamedUsage).
   */
  readonly generatedEvents: number;
  /** The Responses API: the id of the response being streamed, once its first event went by. */
  readonly responseId: string | undefined;
  /** The events that end a stream the gateway must cut: an error in this API's shape, then the end marker. */
  errorEnding(message: string, code: string): Buffer[];
  /**
   * Set when the relay withheld what it read and the stream must stop there (an engine's error event mid-answer,
   * a continuation that cannot be spliced): the attempt ends it as a broken stream. Only the continuation's
   * relays set it.
   */
  readonly stopped?: StreamBreak | undefined;
}
