// "Something changed": a part whose state others wait on says so, and each waiter re-checks what it waits for
// (tests wait on events this way instead of polling). Free when nobody listens.

/** Calls `listener` after every change until the returned function is called. */
export type Subscribe = (listener: () => void) => () => void;

export class ChangeSignal {
  private readonly listeners = new Set<() => void>();

  readonly subscribe: Subscribe = (listener) => {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  };

  notify(): void {
    if (this.listeners.size === 0) return;
    for (const listener of [...this.listeners]) listener();
  }
}
