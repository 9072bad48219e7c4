// Stops one attempt, whether it waits for a backend slot or talks to an engine.
import type { AbandonReason } from "./upstream-failure.js";

/** Why an attempt stopped: the request's cancel reason (client gone, deadline) or the gateway's own. */
export type AttemptStopReason = Error | AbandonReason;

/**
 * Does what an AbortController would do here, for a fraction of the cost. An AbortController is an
 * EventTarget: making one and adding and removing a listener cost ~1.5 KB and several microseconds on
 * every request, before the engine sees it. An attempt never has more than one party to tell at a time
 * (first the slot queue, then the engine call), so one listener slot suffices.
 */
export class AttemptAbort {
  private stopReason: AttemptStopReason | undefined;
  private listener: ((why: Error) => void) | undefined;

  get reason(): AttemptStopReason | undefined {
    return this.stopReason;
  }

  /** The first call wins; later calls are ignored, as with AbortController. */
  abort(reason: AttemptStopReason): void {
    if (this.stopReason !== undefined) return;
    this.stopReason = reason;
    const listener = this.listener;
    this.listener = undefined;
    listener?.(stopReasonError(reason));
  }

  /** Who to tell on abort (with the reason as an Error), replacing the previous listener; undefined to stop. */
  listen(listener: ((why: Error) => void) | undefined): void {
    this.listener = listener;
  }
}

/** The reason as an Error, for APIs that take one (undici's abort, promise rejections). */
export function stopReasonError(reason: AttemptStopReason): Error {
  return reason instanceof Error ? reason : new Error(reason);
}
