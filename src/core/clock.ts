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
