// Time as an injected dependency: the pure core reads it through this interface, tests drive a fake one.

export interface Clock {
  /** Milliseconds on a monotonic-enough timeline (wall clock in production, a counter in tests). */
  nowMs(): number;
}

const timeOriginMs = performance.timeOrigin;

export const systemClock: Clock = {
  nowMs: () => timeOriginMs + performance.now(),
};

/** A clock that moves only when told to: for tests and simulations. */
export class ManualClock implements Clock {
  constructor(private currentMs = 0) {}

  nowMs(): number {
    return this.currentMs;
  }

  advance(ms: number): void {
    if (ms < 0) throw new RangeError(`clock cannot go back (${ms} ms)`);
    this.currentMs += ms;
  }

  set(ms: number): void {
    this.currentMs = ms;
  }
}

/** Timers as an injected dependency: `after` runs `callback` once, `delayMs` from now; calling what it returns cancels it. */
export interface Timers {
  after(delayMs: number, callback: () => void): () => void;
  /**
   * Milliseconds on the timeline the timers run on: a timer that must wait out the rest of a window moved by
   * later events (a stream's stall timer, moved by each read) measures it here, never on another clock.
   */
  nowMs(): number;
}

export const systemTimers: Timers = {
  after(delayMs, callback) {
    const timer = setTimeout(callback, delayMs);
    return () => clearTimeout(timer);
  },
  nowMs: () => performance.now(),
};

/** System timers that do not keep the process alive (background loops: sweeps, engine readings). */
export const backgroundTimers: Timers = {
  nowMs: () => performance.now(),
  after(delayMs, callback) {
    const timer = setTimeout(callback, delayMs);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

/** Timers on a ManualClock: nothing fires until `advance` moves the clock past a timer's due time. */
export class ManualTimers implements Timers {
  private pending: { dueMs: number; order: number; callback: () => void }[] = [];
  private scheduled = 0;

  constructor(readonly clock: ManualClock) {}

  nowMs(): number {
    return this.clock.nowMs();
  }

  after(delayMs: number, callback: () => void): () => void {
    const timer = { dueMs: this.clock.nowMs() + Math.max(0, delayMs), order: this.scheduled++, callback };
    this.pending.push(timer);
    return () => {
      this.pending = this.pending.filter((t) => t !== timer);
    };
  }

  /** Timers not yet fired nor cancelled. */
  get size(): number {
    return this.pending.length;
  }

  /** When the next timer is due (clock ms), if any. */
  nextDueMs(): number | undefined {
    return this.pending.reduce<number | undefined>((min, t) => Math.min(min ?? t.dueMs, t.dueMs), undefined);
  }

  /** Moves the clock `ms` forward, running each timer that comes due on the way at its due time, in order. */
  advance(ms: number): void {
    if (ms < 0) throw new RangeError(`clock cannot go back (${ms} ms)`);
    const endMs = this.clock.nowMs() + ms;
    for (;;) {
      const due = this.pending
        .filter((t) => t.dueMs <= endMs)
        .sort((a, b) => a.dueMs - b.dueMs || a.order - b.order)[0];
      if (due === undefined) break;
      this.pending = this.pending.filter((t) => t !== due);
      this.clock.set(Math.max(this.clock.nowMs(), due.dueMs));
      due.callback();
    }
    this.clock.set(endMs);
  }
}
