// Runs the pure scheduler in real time: each planned step is committed when its (scaled) duration has elapsed.
import { GatewayError } from "../core/errors.js";
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

/**
 * How long one event-loop turn of the engine may go on. Steps already due when planned (every step of the
 * `instant` profile, whose steps cost no simulated time) are committed back to back in one turn rather than one
 * setImmediate each: a turn per step would cost the engine a trip round the event loop, and each streaming
 * client a socket write, for every single token. A turn still ends after this much wall time or this many
 * steps, so new requests and other sockets are not kept waiting behind a long burst.
 */
export interface TurnBudget {
  maxWallMs: number;
  maxSteps: number;
}

export const DEFAULT_TURN_BUDGET: TurnBudget = { maxWallMs: 2, maxSteps: 256 };

export class EngineLoop {
  private readonly listeners = new Map<string, { request: EngineRequest; listener: RequestListener }>();
  private timeout: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  /** The step waiting for its end to be committed (by a timer or an immediate). */
  private inFlight: StepPlan | undefined;
  /** A step is planned and not yet committed, or a turn is committing steps: the engine is not idle. */
  private stepping = false;
  private stopped = false;
  private readonly onStepDue = (): void => {
    this.timeout = undefined;
    this.immediate = undefined;
    const plan = this.inFlight;
    this.inFlight = undefined;
    if (plan && !this.stopped) this.runTurn(plan);
  };

  constructor(
    readonly scheduler: Scheduler,
    readonly timeline: SimTimeline,
    private readonly observer: EngineLoopObserver = {},
    private readonly budget: TurnBudget = DEFAULT_TURN_BUDGET,
  ) {}

  get activeRequests(): number {
    return this.listeners.size;
  }

  submit(request: EngineRequest, listener: RequestListener): void {
    if (this.stopped) throw new GatewayError("shutting_down", "the engine loop was stopped");
    this.listeners.set(request.id, { request, listener });
    this.scheduler.add(request);
    // An idle engine starts stepping on the next turn, never inside submit(): every request arriving in the same
    // I/O phase joins that first step, and no listener is called back before its submit() has returned.
    if (this.stepping) return;
    const plan = this.planStep(false);
    if (plan) this.defer(plan);
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
    this.inFlight = undefined;
    const entries = [...this.listeners.values()];
    this.listeners.clear();
    for (const { request, listener } of entries) {
      this.scheduler.abort(request.id);
      listener.onFinish(request);
    }
  }

  /** Plans the next step at the right simulated instant (the scheduler holds it until commit); undefined when idle. */
  private planStep(backToBack: boolean): StepPlan | undefined {
    const timeline = this.timeline;
    const startMs = timeline.stepStartMs(backToBack);
    timeline.pin(startMs);
    const plan = this.scheduler.schedule();
    this.stepping = plan !== undefined;
    if (!plan) {
      timeline.release();
      return undefined;
    }
    timeline.spanStep(startMs, endOf(plan));
    return plan;
  }

  /** Commits the step when its end comes: by a timer when that is a while off, else on the next turn. */
  private defer(plan: StepPlan): void {
    this.inFlight = plan;
    const delayMs = this.timeline.wallDelayUntilMs(endOf(plan));
    if (delayMs >= MIN_TIMER_DELAY_MS) this.timeout = setTimeout(this.onStepDue, delayMs);
    else this.immediate = setImmediate(this.onStepDue);
  }

  /** One turn: commits `plan`, then every next step that is already due, until idle or the budget is spent. */
  private runTurn(plan: StepPlan): void {
    const timeline = this.timeline;
    const turnStartMs = timeline.wallNowMs();
    for (let steps = 1; ; steps++) {
      this.finishStep(plan);
      if (this.stopped) return;
      const next = this.planStep(true);
      if (!next) return;
      const due = timeline.wallDelayUntilMs(endOf(next)) <= 0;
      const withinBudget =
        steps < this.budget.maxSteps && timeline.wallNowMs() - turnStartMs < this.budget.maxWallMs;
      if (!due || !withinBudget) {
        this.defer(next);
        return;
      }
      plan = next;
    }
  }

  private finishStep(plan: StepPlan): void {
    this.timeline.pin(endOf(plan));
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
  }
}

/** The simulated instant a planned step ends (it was planned at its start). */
function endOf(plan: StepPlan): number {
  return plan.startedMs + plan.durationMs;
}
