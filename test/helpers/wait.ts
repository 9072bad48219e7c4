// Test waits without sleeps: a condition re-checked each time an event says something may have changed.
import type { EventEmitter } from "node:events";
import type { BackendRegistry } from "../../src/backends/registry.js";
import type { Subscribe } from "../../src/core/change-signal.js";
import { ManualTimers } from "../../src/core/clock.js";

export type { Subscribe };

/**
 * Resolves once `condition` holds, re-checking it whenever one of the `on` events fires (never on a timer).
 * `timeoutMs` is only an overall deadline, so that a condition that never comes fails with `what`.
 */
export async function waitUntil(
  what: string,
  condition: () => boolean,
  on: Subscribe | readonly Subscribe[],
  timeoutMs = 20_000,
): Promise<void> {
  if (condition()) return;
  const subscriptions = typeof on === "function" ? [on] : on;
  let unsubscribe: (() => void)[] = [];
  let deadline: NodeJS.Timeout | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      const wake = (): void => {
        try {
          if (condition()) resolve();
        } catch (err) {
          reject(err);
        }
      };
      unsubscribe = subscriptions.map((subscribe) => subscribe(wake));
      deadline = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs);
      wake(); // the event may have fired between the first check and the subscription
    });
  } finally {
    clearTimeout(deadline);
    for (const stop of unsubscribe) stop();
  }
}

/** Wakes on every health transition of `registry`. */
export function healthChanges(registry: BackendRegistry): Subscribe {
  return (wake) => registry.onHealthChange(() => wake());
}

/** Wakes on every `event` of `emitter`. */
export function eventsOf(emitter: EventEmitter, event: string): Subscribe {
  return (wake) => {
    emitter.on(event, wake);
    return () => emitter.off(event, wake);
  };
}

/** ManualTimers that say (just after) when a timer is scheduled (an event to wait on, instead of polling). */
export class WatchedTimers extends ManualTimers {
  private readonly listeners = new Set<() => void>();

  override after(delayMs: number, callback: () => void): () => void {
    const cancel = super.after(delayMs, callback);
    // Told once the caller has finished what it was doing when it scheduled (a queue timeout comes first).
    queueMicrotask(() => {
      for (const listener of this.listeners) listener();
    });
    return cancel;
  }

  readonly onSchedule: Subscribe = (wake) => {
    this.listeners.add(wake);
    return () => this.listeners.delete(wake);
  };
}
