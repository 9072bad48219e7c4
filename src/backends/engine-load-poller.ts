// Reads every engine's /metrics periodically, so the gateway knows each engine's own load and cache truth.
import { Agent } from "undici";
import { backgroundTimers, type Clock, type Timers } from "../core/clock.js";
import { parseEngineLoad } from "./engine-load.js";
import type { BackendRegistry } from "./registry.js";

export interface LoadPollSettings {
  /** 0 turns polling off. */
  intervalMs: number;
  timeoutMs: number;
}

export class EngineLoadPoller {
  // Like the probes: connections of its own, so a busy request pool never delays a reading.
  private readonly agent = new Agent({ connections: 1, pipelining: 1, keepAliveTimeout: 60_000 });
  /** Cancels the next reading, when one is scheduled. */
  private cancel: (() => void) | undefined;
  private polling = false;

  constructor(
    private readonly registry: BackendRegistry,
    private readonly clock: Clock,
    private settings: LoadPollSettings,
    private readonly timers: Timers = backgroundTimers,
  ) {}

  start(): void {
    this.reschedule(0);
  }

  configure(settings: LoadPollSettings): void {
    this.settings = settings;
    this.reschedule(settings.intervalMs);
  }

  async stop(): Promise<void> {
    this.cancel?.();
    this.cancel = undefined;
    this.settings = { ...this.settings, intervalMs: 0 };
    await this.agent.destroy().catch(() => undefined);
  }

  /** Reads every engine once, now (each failure only leaves that engine's last reading in place). */
  async pollOnce(): Promise<void> {
    await Promise.all(
      [...this.registry.all()].map(async (backend) => {
        try {
          const url = new URL(backend.baseUrl.replace(/\/+$/, "") + "/metrics");
          const response = await this.agent.request({
            origin: url.origin,
            path: url.pathname,
            method: "GET",
            headers: backend.upstreamHeaders,
            signal: AbortSignal.timeout(this.settings.timeoutMs),
          });
          const text = await response.body.text();
          if (response.statusCode !== 200) return;
          const load = parseEngineLoad(text, this.clock.nowMs());
          backend.engineLoad = load;
          // Gone from the registry (a reload) while being read: its health is no longer anyone's business.
          if (load.processedTokens !== undefined && this.registry.get(backend.id) === backend)
            this.registry.recordProgress(backend, load.processedTokens);
        } catch {
          // Health is the probes' business; a failed reading just leaves the last one.
        }
      }),
    );
  }

  private reschedule(delayMs: number): void {
    this.cancel?.();
    this.cancel = undefined;
    if (this.settings.intervalMs <= 0) return;
    this.cancel = this.timers.after(delayMs, () => void this.tick());
  }

  private async tick(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      await this.pollOnce();
    } finally {
      this.polling = false;
      this.reschedule(this.settings.intervalMs);
    }
  }
}
