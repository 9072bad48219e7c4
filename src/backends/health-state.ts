// The per-backend health state machine (pure, time passed in): probe streaks, outlier ejection, progress.

export type Health = "up" | "down";

/** Outlier ejection (as Envoy's): requests that keep failing take an engine out even while its probes pass. */
export interface EjectionPolicy {
  /** Consecutive failed or timed-out requests (no request success between) that eject the engine. */
  consecutiveFailures: number;
  /** The first ejection lasts this long; each further one twice as long as the one before... */
  baseMs: number;
  /** ...up to this. After this long without an ejection, the next one is short again. */
  maxMs: number;
  /** An engine with requests in flight whose token counters have not moved for this long is hung; 0: off. */
  stallMs: number;
}

export interface HealthThresholds {
  /** Consecutive failures that take an up backend down (the original acted on the first one). */
  failuresToMarkDown: number;
  /** Consecutive successes that bring a down backend back up. */
  successesToMarkUp: number;
  /** Without it, nothing is ejected (only the probe streaks decide). */
  ejection?: EjectionPolicy;
}

/** What an ejection attempt did. */
export type EjectOutcome = "ejected" | "withheld" | "none";

export class HealthStateMachine {
  private probeHealth: Health;
  private consecutiveFailures = 0;
  private consecutiveSuccesses = 0;
  /** Request failures since the last request success: only requests move it, never probes. */
  private requestFailures = 0;
  /** Set while ejected: the ejection lasts at least until then, and ends at a successful probe after it. */
  private ejectedUntil: number | undefined;
  private ejections = 0;
  private lastEjectionEndMs = -Infinity;
  /** The last token-counter reading and when it last moved (or the engine was last idle). */
  private lastProgressCount: number | undefined;
  private lastProgressMs = 0;

  constructor(
    private thresholds: HealthThresholds,
    initial: Health = "up",
  ) {
    this.probeHealth = initial;
  }

  get health(): Health {
    return this.probeHealth === "down" || this.ejectedUntil !== undefined ? "down" : "up";
  }

  get failureStreak(): number {
    return this.consecutiveFailures;
  }

  /** When the current ejection may end (clock ms), or undefined when not ejected. */
  get ejectedUntilMs(): number | undefined {
    return this.ejectedUntil;
  }

  get ejectionCount(): number {
    return this.ejections;
  }

  setThresholds(thresholds: HealthThresholds): void {
    this.thresholds = thresholds;
  }

  /** A probe's outcome: the streaks as before; an ejection whose time has passed ends at a good probe. */
  recordProbe(ok: boolean, nowMs: number): Health | undefined {
    return this.transition(() => {
      if (ok && this.ejectedUntil !== undefined && nowMs >= this.ejectedUntil) {
        this.ejectedUntil = undefined;
        this.lastEjectionEndMs = nowMs;
        this.requestFailures = 0;
        this.lastProgressCount = undefined;
      }
      if (ok) this.success();
      else this.failure();
    });
  }

  /**
   * A real request's outcome. Failures count toward an ejection only (probes cannot reset them; only a
   * request success does), so a dead engine still leaves within a few requests. `mayEject` is false when
   * this engine is the last available one of its tier: then it keeps serving and the caller reports
   * "withheld".
   */
  recordRequest(
    ok: boolean,
    nowMs: number,
    mayEject: boolean,
  ): { to: Health | undefined; eject: EjectOutcome } {
    let eject: EjectOutcome = "none";
    const to = this.transition(() => {
      if (ok) {
        this.requestFailures = 0;
        this.success();
        return;
      }
      this.requestFailures++;
      const policy = this.thresholds.ejection;
      if (policy !== undefined && this.requestFailures >= policy.consecutiveFailures)
        eject = this.eject(nowMs, mayEject);
    });
    return { to, eject };
  }

  /**
   * A reading of the engine's cumulative token counters while `busy` (the gateway has requests on it). A
   * counter that has not moved for stallMs while busy means the engine is hung, whatever /health says.
   */
  recordProgress(
    tokenCount: number,
    busy: boolean,
    nowMs: number,
    mayEject: boolean,
  ): { to: Health | undefined; eject: EjectOutcome } {
    let eject: EjectOutcome = "none";
    const to = this.transition(() => {
      const policy = this.thresholds.ejection;
      const moved = this.lastProgressCount === undefined || tokenCount !== this.lastProgressCount;
      this.lastProgressCount = tokenCount;
      if (!busy || moved) {
        this.lastProgressMs = nowMs;
        return;
      }
      if (policy === undefined || policy.stallMs <= 0 || this.ejectedUntil !== undefined) return;
      if (nowMs - this.lastProgressMs >= policy.stallMs) {
        eject = this.eject(nowMs, mayEject);
        this.lastProgressMs = nowMs;
      }
    });
    return { to, eject };
  }

  /** Kept for callers that do not distinguish probes from requests (probe semantics). */
  recordSuccess(): Health | undefined {
    return this.transition(() => this.success());
  }

  recordFailure(): Health | undefined {
    return this.transition(() => this.failure());
  }

  private eject(nowMs: number, mayEject: boolean): EjectOutcome {
    const policy = this.thresholds.ejection!;
    this.requestFailures = 0;
    if (this.ejectedUntil !== undefined) return "none";
    if (!mayEject) return "withheld";
    if (nowMs - this.lastEjectionEndMs > policy.maxMs) this.ejections = 0;
    const durationMs = Math.min(policy.baseMs * 2 ** this.ejections, policy.maxMs);
    this.ejections++;
    this.ejectedUntil = nowMs + durationMs;
    return "ejected";
  }

  private success(): void {
    this.consecutiveFailures = 0;
    this.consecutiveSuccesses++;
    if (this.probeHealth === "down" && this.consecutiveSuccesses >= this.thresholds.successesToMarkUp)
      this.probeHealth = "up";
  }

  private failure(): void {
    this.consecutiveSuccesses = 0;
    this.consecutiveFailures++;
    if (this.probeHealth === "up" && this.consecutiveFailures >= this.thresholds.failuresToMarkDown)
      this.probeHealth = "down";
  }

  /** Runs a change and returns the new overall health when it differs from before. */
  private transition(change: () => void): Health | undefined {
    const before = this.health;
    change();
    const after = this.health;
    return after === before ? undefined : after;
  }
}
