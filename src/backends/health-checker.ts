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

interface ProbeState {
  /** Cancels the scheduled probe. */
  cancel: (() => void) | undefined;
  inFlight: boolean;
  lastStartedMs: number;
}

export class HealthChecker {
  // Probes never queue behind long generations on the request pools: one small pool of their own.
  private readonly agent = new Agent({ connections: 1, pipelining: 1, keepAliveTimeout: 60_000 });
  private readonly states = new Map<string, ProbeState>();
  private running = false;

  constructor(
    private readonly registry: BackendRegistry,
    private settings: ProbeSettings,
    private readonly clock: Clock = systemClock,
    private readonly timers: Timers = systemTimers,
  ) {}

  start(): void {
    this.running = true;
    for (const backend of this.registry.all()) this.schedule(backend.id, 0);
  }

  configure(settings: ProbeSettings): void {
    this.settings = settings;
    // Backends added by a reload get their probe loop; removed ones stop theirs at their next turn.
    if (this.running)
      for (const backend of this.registry.all())
        if (!this.states.has(backend.id)) this.schedule(backend.id, 0);
  }

  /** Probes a backend now (if it is not already being probed): a request just failed on it. */
  probeSoon(backendId: string): void {
    const state = this.states.get(backendId);
    if (!this.running || state === undefined || state.inFlight) return;
    if (this.clock.nowMs() - state.lastStartedMs < EARLY_PROBE_MIN_GAP_MS) return;
    this.schedule(backendId, 0);
  }

  async stop(): Promise<void> {
    this.running = false;
    for (const state of this.states.values()) state.cancel?.();
    this.states.clear();
    await this.agent.destroy().catch(() => undefined);
  }

  private schedule(backendId: string, delayMs: number): void {
    let state = this.states.get(backendId);
    if (state === undefined) {
      state = { cancel: undefined, inFlight: false, lastStartedMs: -Infinity };
      this.states.set(backendId, state);
    }
    state.cancel?.();
    state.cancel = this.timers.after(delayMs, () => void this.probe(backendId));
  }

  private async probe(backendId: string): Promise<void> {
    const state = this.states.get(backendId);
    const backend = this.registry.get(backendId);
    if (!this.running || state === undefined) return;
    if (backend === undefined) {
      this.states.delete(backendId); // removed by a reload
      return;
    }
    state.inFlight = true;
    state.lastStartedMs = this.clock.nowMs();
    const ok = await this.check(backend);
    state.inFlight = false;
    if (!this.running || this.registry.get(backendId) !== backend) return;
    this.registry.recordOutcome(backend, ok, "probe");
    this.schedule(backendId, this.settings.intervalMs);
  }

  /** One probe: 200 from GET {base_url}/health within the timeout. */
  private async check(backend: Backend): Promise<boolean> {
    const url = backend.baseUrl.replace(/\/+$/, "") + "/health";
    try {
      const response = await this.agent.request({
        origin: new URL(url).origin,
        path: new URL(url).pathname,
        method: "GET",
        signal: AbortSignal.timeout(this.settings.timeoutMs),
        headersTimeout: this.settings.timeoutMs,
        bodyTimeout: this.settings.timeoutMs,
      });
      await response.body.dump();
      return response.statusCode === 200;
    } catch {
      return false;
    }
  }
}
