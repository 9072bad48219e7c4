// Runs the pure scheduler in real time: each planned step is committed when its (scaled) duration has elapsed.
import type { EngineRequest } from "./request.js";
import type { Scheduler, StepOutput, StepPlan } from "./scheduler.js";
import type { SimTimeline } from "./sim-timeline.js";

/** How a live request hears about its progress. */
export interface RequestListener {
  /** A reply token was sampled (its text is request.outputTexts[tokenIndex]). */
  onToken(request: EngineRequest, tokenIndex: number): void;
  /** The request finished: request.finishReason says how (abort included). */
  onFinish(request: EngineRequest): void;
}

export interface EngineLoopObserver {
  onStep?(plan: StepPlan, outputs: readonly StepOutput[]): void;
  onFinish?(request: EngineRequest): void;
  onListenerError?(error: unknown): void;
}

/** Delays below this are not worth a timer: setTimeout cannot wait less than about a millisecond anyway. */
const MIN_TIMER_DELAY_MS = 1;

export class EngineLoop {
  private readonly listeners = new Map<string, { request: EngineRequest; listener: RequestListener }>();
  private timeout: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private stepping = false;
  private stopped = false;

  constructor(
    readonly scheduler: Scheduler,
    readonly timeline: SimTimeline,
    private readonly observer: EngineLoopObserver = {},
  ) {}

  get activeRequests(): number {
    return this.listeners.size;
  }

  submit(request: EngineRequest, listener: RequestListener): void {
    if (this.stopped) throw new Error("the engine loop was stopped");
    this.listeners.set(request.id, { request, listener });
    this.scheduler.add(request);
    if (!this.stepping) this.runStep(false);
  }

  /** Cancels a request (client went away); its blocks are freed at once. No callback follows. */
  abort(requestId: string): void {
    if (!this.listeners.delete(requestId)) return;
    this.scheduler.abort(requestId);
  }

  /** Aborts everything and stops stepping; listeners get onFinish with reason "abort". */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timeout) clearTimeout(this.timeout);
    if (this.immediate) clearImmediate(this.immediate);
    this.timeout = undefined;
    this.immediate = undefined;
    const entries = [...this.listeners.values()];
    this.listeners.clear();
    for (const { request, listener } of entries) {
      this.scheduler.abort(request.id);
      listener.onFinish(request);
    }
  }

  private runStep(backToBack: boolean): void {
    const timeline = this.timeline;
    const startMs = timeline.stepStartMs(backToBack);
    timeline.pin(startMs);
    const plan = this.scheduler.schedule();
    if (!plan) {
      timeline.release();
      this.stepping = false;
      return;
    }
    this.stepping = true;
    const endMs = startMs + plan.durationMs;
    timeline.spanStep(startMs, endMs);
    const fire = (): void => {
      this.timeout = undefined;
      this.immediate = undefined;
      if (this.stopped) return;
      this.finishStep(plan, endMs);
    };
    const delayMs = timeline.wallDelayUntilMs(endMs);
    if (delayMs >= MIN_TIMER_DELAY_MS) this.timeout = setTimeout(fire, delayMs);
    else this.immediate = setImmediate(fire);
  }

  private finishStep(plan: StepPlan, endMs: number): void {
    this.timeline.pin(endMs);
    const outputs = this.scheduler.commit(plan);
    this.timeline.release();
    this.observer.onStep?.(plan, outputs);
    for (const output of outputs) {
      if (output.tokenIndex < 0) continue;
      const entry = this.listeners.get(output.request.id);
      if (!entry) continue;
      if (output.finished) {
        this.listeners.delete(output.request.id);
        this.observer.onFinish?.(output.request);
      }
      try {
        entry.listener.onToken(output.request, output.tokenIndex);
        if (output.finished) entry.listener.onFinish(output.request);
      } catch (err) {
        // One broken listener must not stall every other sequence in the batch.
        this.observer.onListenerError?.(err);
        this.abort(output.request.id);
      }
    }
    if (!this.stopped) this.runStep(true);
  }
}
