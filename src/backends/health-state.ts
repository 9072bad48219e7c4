// The per-backend health state machine (pure): consecutive probe/request outcomes against the thresholds.

export type Health = "up" | "down";

export interface HealthThresholds {
  /** Consecutive failures that take an up backend down (the original acted on the first one). */
  failuresToMarkDown: number;
  /** Consecutive successes that bring a down backend back up. */
  successesToMarkUp: number;
}

export class HealthStateMachine {
  private current: Health;
  private consecutiveFailures = 0;
  private consecutiveSuccesses = 0;

  constructor(
    private thresholds: HealthThresholds,
    initial: Health = "up",
  ) {
    this.current = initial;
  }

  get health(): Health {
    return this.current;
  }

  get failureStreak(): number {
    return this.consecutiveFailures;
  }

  setThresholds(thresholds: HealthThresholds): void {
    this.thresholds = thresholds;
  }

  /** Returns the new health when this outcome changed it, else undefined. */
  recordSuccess(): Health | undefined {
    this.consecutiveFailures = 0;
    this.consecutiveSuccesses++;
    if (this.current === "down" && this.consecutiveSuccesses >= this.thresholds.successesToMarkUp) {
      this.current = "up";
      return this.current;
    }
    return undefined;
  }

  /** Returns the new health when this outcome changed it, else undefined. */
  recordFailure(): Health | undefined {
    this.consecutiveSuccesses = 0;
    this.consecutiveFailures++;
    if (this.current === "up" && this.consecutiveFailures >= this.thresholds.failuresToMarkDown) {
      this.current = "down";
      return this.current;
    }
    return undefined;
  }
}
