// Active health probes: GET /health on every engine at the configured interval, on connections of their own.
import { Agent } from "undici";
import { systemClock, systemTimers, type Clock, type Timers } from "../core/clock.js";
import type { Backend } from "./backend.js";
import type { BackendRegistry } from "./registry.js";

export interface ProbeSettings {
  intervalMs: number;
  timeoutMs: number;
}

/** An early probe after a failed request is not repeated more often than this. */
const EARLY_PROBE_MIN_GAP_MS = 100;

/** One finished probe, for whoever watches them (tests, logs). */
export interface ProbeResult {
  readonly backendId: string;
  readonly ok: boolean;
  readonly startedAtMs: number;
  readonly endedAtMs: number;
}

interface ProbeState {
  /** Cancels the next scheduled probe. */
  cancel: (() => void) | undefined;
  /** When the next scheduled probe is due: the schedule is a fixed grid, never pushed back by slow probes. */
  nextDueMs: number;
  /** Probes started and not yet settled (0 or 1). */
  inFlight: number;
  lastStartedMs: number;
}

/**
 * Each backend is probed on a fixed schedule: a probe starts every interval whatever the previous one did
 * (a hung probe does not delay the next), and fails at its timeout, on the injected timers. So a hung engine
 * is marked down within failures_to_mark_down x interval + timeout of hanging: the first probe that starts
 * after it hung starts within one interval, the failures_to_mark_down-th one (failures - 1) intervals later,
 * and that one fails at its timeout. (With probe_timeout above probe_interval a probe may still run when
 * the next is due: that one is skipped, so a probe then takes the grid points its timeout spans.)
 */
export class HealthChecker {
  // Probes never queue behind long generations on the request pools: small pools of their own.
  private readonly agent = new Agent({ connections: 2, pipelining: 1, keepAliveTimeout: 60_000 });
  private readonly states = new Map<string, ProbeState>();
  private readonly probeListeners = new Set<(result: ProbeResult) => void>();
  private running = false;

  constructor(
    private readonly registry: BackendRegistry,
    private settings: ProbeSettings,
    private readonly clock: Clock = systemClock,
    private readonly timers: Timers = systemTimers,
  ) {}

  start(): void {
    this.running = true;
    for (const backend of this.registry.all()) this.scheduleAt(backend.id, this.clock.nowMs());
  }

  configure(settings: ProbeSettings): void {
    const intervalChanged = settings.intervalMs !== this.settings.intervalMs;
    this.settings = settings;
    if (!this.running) return;
    // Backends added by a reload get their probe loop; removed ones stop theirs at their next turn. A new
    // interval takes effect from now (the next probe is one new interval after the last one started).
    for (const backend of this.registry.all()) {
      const state = this.states.get(backend.id);
      if (state === undefined) this.scheduleAt(backend.id, this.clock.nowMs());
      else if (intervalChanged)
        this.scheduleAt(backend.id, Math.max(this.clock.nowMs(), state.lastStartedMs + settings.intervalMs));
    }
  }

  /** Tells `listener` of every probe that settles; returns the unsubscribe function. */
  onProbe(listener: (result: ProbeResult) => void): () => void {
    this.probeListeners.add(listener);
    return () => this.probeListeners.delete(listener);
  }

  /**
   * Probes a backend now (if it is not already being probed): a request just failed on it. The schedule is
   * left as it is: this probe comes in addition.
   */
  probeSoon(backendId: string): void {
    const state = this.states.get(backendId);
    if (!this.running || state === undefined || state.inFlight > 0) return;
    if (this.clock.nowMs() - state.lastStartedMs < EARLY_PROBE_MIN_GAP_MS) return;
    this.timers.after(0, () => void this.probe(backendId));
  }

  async stop(): Promise<void> {
    this.running = false;
    for (const state of this.states.values()) state.cancel?.();
    this.states.clear();
    await this.agent.destroy().catch(() => undefined);
  }

  /** (Re)sets the backend's schedule so that its next probe starts at `dueMs`. */
  private scheduleAt(backendId: string, dueMs: number): void {
    let state = this.states.get(backendId);
    if (state === undefined) {
      state = { cancel: undefined, nextDueMs: dueMs, inFlight: 0, lastStartedMs: -Infinity };
      this.states.set(backendId, state);
    }
    state.cancel?.();
    state.nextDueMs = dueMs;
    state.cancel = this.timers.after(dueMs - this.clock.nowMs(), () => this.tick(backendId));
  }

  /** A scheduled probe is due: the next one is booked first, one interval after this one's due time. */
  private tick(backendId: string): void {
    const state = this.states.get(backendId);
    if (!this.running || state === undefined) return;
    if (this.registry.get(backendId) === undefined) {
      this.states.delete(backendId); // removed by a reload
      return;
    }
    // Due times stay on the grid; only a clock that jumped past several of them skips to the next one ahead.
    const nowMs = this.clock.nowMs();
    let nextDueMs = state.nextDueMs + this.settings.intervalMs;
    if (nextDueMs <= nowMs) nextDueMs = nowMs + this.settings.intervalMs;
    this.scheduleAt(backendId, nextDueMs);
    // A probe still running (only when probe_timeout exceeds probe_interval) is not doubled: probes that
    // overlap would all fail together in one slow spell and count as that many failures.
    if (state.inFlight === 0) void this.probe(backendId);
  }

  private async probe(backendId: string): Promise<void> {
    const state = this.states.get(backendId);
    const backend = this.registry.get(backendId);
    if (!this.running || state === undefined || backend === undefined) return;
    state.inFlight++;
    const startedAtMs = this.clock.nowMs();
    state.lastStartedMs = startedAtMs;
    const ok = await this.check(backend);
    state.inFlight--;
    if (!this.running || this.registry.get(backendId) !== backend) return;
    this.registry.recordOutcome(backend, ok, "probe");
    const result = { backendId, ok, startedAtMs, endedAtMs: this.clock.nowMs() };
    for (const listener of [...this.probeListeners]) listener(result);
  }

  /** One probe: 200 from GET {base_url}/health within the timeout (on the injected timers). */
  private async check(backend: Backend): Promise<boolean> {
    const url = new URL(backend.baseUrl.replace(/\/+$/, "") + "/health");
    const controller = new AbortController();
    const cancelTimeout = this.timers.after(this.settings.timeoutMs, () =>
      controller.abort(new Error("probe timed out")),
    );
    try {
      const response = await this.agent.request({
        origin: url.origin,
        path: url.pathname,
        method: "GET",
        signal: controller.signal,
        // The injected timer above is the timeout; undici's own (on the wall clock) are off.
        headersTimeout: 0,
        bodyTimeout: 0,
      });
      await response.body.dump();
      return response.statusCode === 200;
    } catch {
      return false;
    } finally {
      cancelTimeout();
    }
  }
}
