// The flow scheduler's pure core: which waiting request takes a free engine slot next (bands, policy, caps),
// which is shed when the queue overflows. No timers, no promises: BackendSlots acts on what it returns.
import type { AttainedService } from "./attained-service.js";
import { createFlowPolicy } from "./create-policy.js";
import type { FlowItem, FlowPolicy, FlowPolicyName } from "./types.js";

/** An engine's slots as the dispatcher counts them (a Backend: placement reads `queued`). */
export interface SlotTarget {
  readonly id: string;
  maxInflight: number;
  inflight: number;
  /** Requests waiting for a slot on this engine. */
  queued: number;
}

/** A request waiting for a slot on the engine placement chose for it (`target`): where is not ours to decide. */
export interface FlowRequest extends FlowItem {
  readonly target: SlotTarget;
  /** Counted against max_inflight_per_agent (an agent's request; sessions and anonymous requests are not). */
  readonly capped: boolean;
}

export interface DispatcherSettings {
  policy: FlowPolicyName;
  /** Priority bands 0 (lowest) .. bands-1 (highest). */
  bands: number;
  /** Waiting requests across all engines; beyond it the lowest band sheds. 0: nothing waits. */
  maxWaiting: number;
  /** Slots one capped flow may hold at once across all engines; 0: no cap. */
  maxInflightPerFlow: number;
}

export interface Arrival<T> {
  /** The request took a slot at once. */
  granted: boolean;
  /** The request shed to stay within maxWaiting (the newcomer itself, or a waiting one of a lower band). */
  shed: T | undefined;
}

export class FlowDispatcher<T extends FlowRequest> {
  private bands: FlowPolicy<T>[] = [];
  /** Every waiting request, in arrival order. */
  private readonly waiting = new Set<T>();
  /** Slots held per capped flow; a flow holding none has no entry (bounded by the slots in use). */
  private readonly held = new Map<string, number>();
  private seq = 0;

  constructor(
    private settings: DispatcherSettings,
    private readonly service: AttainedService,
  ) {
    this.bands = this.makeBands();
  }

  get size(): number {
    return this.waiting.size;
  }

  /** The next arrival number (a FlowRequest's seq). */
  nextSeq(): number {
    return this.seq++;
  }

  /** A band clamped into range: bad input never indexes outside the bands. */
  band(band: number): number {
    return Math.min(this.settings.bands - 1, Math.max(0, Math.trunc(band) || 0));
  }

  waitingIn(band: number): number {
    return this.bands[band]?.size ?? 0;
  }

  /** Slots the flow holds now (capped flows only). */
  heldBy(flow: string): number {
    return this.held.get(flow) ?? 0;
  }

  /** Flows holding slots now: bounded by the slots in use. */
  get holdingFlows(): number {
    return this.held.size;
  }

  /** New settings: the waiting requests are re-ordered under the new policy and bands, then what fits starts. */
  configure(settings: DispatcherSettings): T[] {
    this.settings = settings;
    this.bands = this.makeBands();
    for (const item of this.waiting) this.bands[this.band(item.band)]!.push(item);
    return this.pump();
  }

  /** A request for a slot: granted now when it can start (nothing runnable waits then), else it waits. */
  arrive(item: T): Arrival<T> {
    if (this.runnable(item)) {
      this.grant(item);
      return { granted: true, shed: undefined };
    }
    this.bands[this.band(item.band)]!.push(item);
    this.waiting.add(item);
    item.target.queued++;
    if (this.waiting.size <= this.settings.maxWaiting) return { granted: false, shed: undefined };
    const victim = this.bands.find((b) => b.size > 0)!.last()!;
    this.withdraw(victim);
    return { granted: false, shed: victim };
  }

  /**
   * A request that could start at once (its engine has a slot, its flow is under its cap: the caller checked)
   * takes the slot without entering the queue: nothing that could take that slot waits, so none is passed.
   */
  arriveStarted(target: SlotTarget, flow: string, capped: boolean): void {
    target.inflight++;
    if (capped) this.held.set(flow, this.heldBy(flow) + 1);
  }

  /** A waiting request leaves (timeout, client gone); false if it was not waiting. */
  withdraw(item: T): boolean {
    if (!this.waiting.delete(item)) return false;
    this.bands[this.band(item.band)]!.remove(item);
    item.target.queued--;
    return true;
  }

  /** A request that held a slot is done with it: frees the slot and the flow's share; returns who starts now. */
  finish(item: Pick<T, "flow" | "capped" | "target">): T[] {
    item.target.inflight--;
    if (item.capped) {
      const held = (this.held.get(item.flow) ?? 1) - 1;
      if (held <= 0) this.held.delete(item.flow);
      else this.held.set(item.flow, held);
    }
    return this.pump();
  }

  /** Starts every waiting request that can start, highest band first, in the policy's order. */
  pump(): T[] {
    const started: T[] = [];
    const runnable = (item: T): boolean => this.runnable(item);
    for (let band = this.bands.length - 1; band >= 0; band--) {
      const policy = this.bands[band]!;
      for (let item = policy.take(runnable); item !== undefined; item = policy.take(runnable)) {
        this.waiting.delete(item);
        item.target.queued--;
        this.grant(item);
        started.push(item);
      }
    }
    return started;
  }

  /** The engine went down or away: its waiting requests leave (they fail over elsewhere). */
  dropTarget(targetId: string): T[] {
    const dropped = [...this.waiting].filter((item) => item.target.id === targetId);
    for (const item of dropped) this.withdraw(item);
    return dropped;
  }

  private runnable(item: T): boolean {
    if (item.target.inflight >= item.target.maxInflight) return false;
    const cap = this.settings.maxInflightPerFlow;
    return !item.capped || cap === 0 || this.heldBy(item.flow) < cap;
  }

  private grant(item: T): void {
    this.arriveStarted(item.target, item.flow, item.capped);
  }

  private makeBands(): FlowPolicy<T>[] {
    return Array.from({ length: this.settings.bands }, () =>
      createFlowPolicy<T>(this.settings.policy, this.service),
    );
  }
}
