// Attempts waiting on each backend, so that marking a backend down can abandon them and fail them over.
import type { AttemptAbort } from "./attempt-abort.js";
import type { AbandonReason } from "./upstream-failure.js";

export class AttemptTracker {
  private readonly byBackend = new Map<string, Set<AttemptAbort>>();

  /** Registers an attempt; the returned function unregisters it (call it in `finally` or on commit). */
  track(backendId: string, abort: AttemptAbort): () => void {
    let set = this.byBackend.get(backendId);
    if (set === undefined) {
      set = new Set();
      this.byBackend.set(backendId, set);
    }
    set.add(abort);
    return () => set.delete(abort);
  }

  /** Aborts every uncommitted attempt on a backend (their requests retry elsewhere). */
  abandon(backendId: string, reason: AbandonReason): number {
    const set = this.byBackend.get(backendId);
    if (set === undefined) return 0;
    const aborts = [...set];
    set.clear();
    for (const abort of aborts) abort.abort(reason);
    return aborts.length;
  }
}
