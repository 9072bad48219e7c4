// Simulated time for a live engine: wall time multiplied by the time scale, advanced exactly by step durations.
//
// Steps are scheduled at absolute simulated instants, so timer lateness never accumulates as drift: a step whose
// timer fired late simply makes the next step's deadline nearer. Arrivals during a step are stamped with the scaled
// wall time, clamped into the step's span, so the engine's clock never runs backwards.
import type { Clock } from "../core/clock.js";

export class SimTimeline implements Clock {
  private readonly wallOriginMs: number;
  private floorMs = 0;
  private ceilingMs = Number.POSITIVE_INFINITY;

  constructor(
    private readonly wall: Clock,
    readonly timeScale: number,
  ) {
    if (!(timeScale > 0) || !Number.isFinite(timeScale)) {
      throw new RangeError(`time scale must be a positive number (got ${timeScale})`);
    }
    this.wallOriginMs = wall.nowMs();
  }

  /** Simulated milliseconds since the engine started. */
  nowMs(): number {
    const scaled = (this.wall.nowMs() - this.wallOriginMs) * this.timeScale;
    return Math.min(this.ceilingMs, Math.max(this.floorMs, scaled));
  }

  /** The simulated instant a step starting now would start at: exactly the previous end when back to back. */
  stepStartMs(backToBack: boolean): number {
    return backToBack ? this.floorMs : this.nowMs();
  }

  /** Freezes the clock at `ms` (while the scheduler plans or commits a step at that instant). */
  pin(ms: number): void {
    this.floorMs = ms;
    this.ceilingMs = ms;
  }

  /** A step spanning [startMs, endMs] is in flight: arrivals are stamped within it. */
  spanStep(startMs: number, endMs: number): void {
    this.floorMs = startMs;
    this.ceilingMs = endMs;
  }

  /** Lets the clock follow the wall again, never earlier than where it was pinned last. */
  release(): void {
    this.ceilingMs = Number.POSITIVE_INFINITY;
  }

  /** The wall clock itself, for budgets measured in real time. */
  wallNowMs(): number {
    return this.wall.nowMs();
  }

  /** Wall milliseconds from now until the simulated instant `simMs` (negative when it is already past). */
  wallDelayUntilMs(simMs: number): number {
    return this.wallOriginMs + simMs / this.timeScale - this.wall.nowMs();
  }
}
