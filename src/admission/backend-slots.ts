// Enforces each backend's max_inflight: a request takes a slot or waits, time-limited, in the flow scheduler's
// queue (flow-queue/), which decides who takes a slot that frees; the engine a request waits for is placement's.
import { ChangeSignal } from "../core/change-signal.js";
import { systemClock, systemTimers, type Timers } from "../core/clock.js";
import { GatewayError } from "../core/errors.js";
import { AttainedService } from "./flow-queue/attained-service.js";
import { FlowDispatcher, type FlowRequest, type SlotTarget } from "./flow-queue/flow-dispatcher.js";
import { gatewayTicket, type FlowTicket } from "./flow-queue/flow-ticket.js";
import type { FlowPolicyName } from "./flow-queue/types.js";

export type SlotHolder = SlotTarget;

export interface QueueSettings {
  /** Waiting requests across all backends; 0 means no waiting at all. */
  maxQueueSize: number;
  queueTimeoutMs: number;
  /** The order within a band (default least-attained). */
  policy?: FlowPolicyName;
  /** Priority bands (default 1). */
  bands?: number;
  /** Slots one agent may hold at once (default 0: no cap). */
  maxInflightPerAgent?: number;
  /** The band of calls that name no ticket (the gateway's own, the tier classifier): default 0. */
  defaultBand?: number;
}

/** What withdraws a waiter (the gateway's AttemptAbort): it tells its one listener why, at most once. */
export interface WaitAbort {
  listen(listener: ((why: Error) => void) | undefined): void;
}

interface Waiter extends FlowRequest {
  resolve: () => void;
  reject: (err: Error) => void;
  /** Cancels the queue timeout. */
  cancelTimeout: () => void;
  abort: WaitAbort | undefined;
  ticket: FlowTicket;
}

/** Rejects queued requests whose backend went down, so they fail over instead of waiting it out. */
export class SlotUnavailableError extends GatewayError {
  override name = "SlotUnavailableError";
  constructor(message: string) {
    super("backend_unavailable", message);
  }
}

const DEFAULT_SERVICE = { halfLifeMs: 120_000, maxFlows: 10_000 };

export class BackendSlots {
  private readonly dispatcher: FlowDispatcher<Waiter>;
  /** The ticket of calls that name none (the gateway's own): default band, no cap, never charged. */
  private plain: FlowTicket;
  /** Told after every slot taken, waiter queued, slot returned or waiter gone (what tests wait on). */
  readonly changes = new ChangeSignal();

  constructor(
    private settings: QueueSettings,
    readonly service: AttainedService = new AttainedService(DEFAULT_SERVICE, systemClock),
    /** Where queue timeouts run (a gateway on a manual clock times its queues out on it). */
    private readonly timers: Timers = systemTimers,
  ) {
    this.dispatcher = new FlowDispatcher<Waiter>(dispatcherSettings(settings), service);
    this.plain = gatewayTicket(settings.defaultBand ?? 0);
  }

  get depth(): number {
    return this.dispatcher.size;
  }

  /** Requests waiting in a priority band. */
  waitingIn(band: number): number {
    return this.dispatcher.waitingIn(band);
  }

  /** The active flows' attained service (for the fairness index). */
  activeService(): number[] {
    return this.service.activeValues();
  }

  get bands(): number {
    return this.settings.bands ?? 1;
  }

  configure(settings: QueueSettings): void {
    this.settings = settings;
    this.plain = gatewayTicket(settings.defaultBand ?? 0);
    this.start(this.dispatcher.configure(dispatcherSettings(settings)));
  }

  /** A band clamped into the configured range. */
  band(band: number): number {
    return this.dispatcher.band(band);
  }

  /**
   * Takes a slot on `backend`: at once (returns undefined) when one is free and the ticket's flow is under its
   * cap, else a promise that resolves when the flow scheduler gives it one. Rejects with 503 queue_full (shed:
   * the queue is full and this request's band is the lowest waiting) / queue_timeout, SlotUnavailableError
   * when the backend goes down, or the abort's reason when the attempt is stopped while it waits.
   */
  acquire(
    backend: SlotHolder,
    abort?: WaitAbort,
    ticket: FlowTicket = this.plain,
  ): Promise<void> | undefined {
    const cap = this.settings.maxInflightPerAgent ?? 0;
    if (
      backend.inflight < backend.maxInflight &&
      (!ticket.capped || cap === 0 || this.dispatcher.heldBy(ticket.flow) < cap)
    ) {
      // The common case: no promise, no allocation. Nothing that could take this slot waits (work-conserving).
      this.dispatcher.arriveStarted(backend, ticket.flow, ticket.capped);
      this.charged(ticket);
      this.changes.notify();
      return undefined;
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        flow: ticket.flow,
        band: this.dispatcher.band(ticket.band),
        seq: this.dispatcher.nextSeq(),
        target: backend,
        capped: ticket.capped,
        ticket,
        resolve,
        reject,
        abort,
        cancelTimeout: this.timers.after(this.settings.queueTimeoutMs, () => {
          this.dispatcher.withdraw(waiter);
          waiter.abort?.listen(undefined);
          this.changes.notify();
          reject(
            new GatewayError(
              "queue_timeout",
              `waited ${this.settings.queueTimeoutMs} ms for a slot on ${backend.id}`,
              { retryAfterSeconds: Math.ceil(this.settings.queueTimeoutMs / 1000) },
            ),
          );
        }),
      };
      abort?.listen((why) => {
        this.dispatcher.withdraw(waiter);
        waiter.cancelTimeout();
        this.changes.notify();
        reject(why);
      });
      const { shed } = this.dispatcher.arrive(waiter);
      if (shed !== undefined) {
        this.settle(shed);
        shed.reject(
          new GatewayError(
            "queue_full",
            `backend ${shed.target.id} is at max_inflight and the queue is full (admission.max_queue_size) of requests of band ${shed.band} or higher`,
            { retryAfterSeconds: 1 },
          ),
        );
      }
      this.changes.notify();
    });
  }

  /** Returns a slot: the flow scheduler hands it (and any the ticket's flow cap held back) to who goes next. */
  release(backend: SlotHolder, ticket: FlowTicket = this.plain): void {
    this.start(this.dispatcher.finish({ flow: ticket.flow, capped: ticket.capped, target: backend }));
    this.changes.notify();
  }

  /** Hands free slots to waiters (after a reload raised max_inflight). */
  pump(_backend?: SlotHolder): void {
    this.start(this.dispatcher.pump());
  }

  /** The backend went down or was removed: its waiters fail over elsewhere. */
  rejectWaiters(backendId: string, reason: string): void {
    for (const waiter of this.dispatcher.dropTarget(backendId)) {
      this.settle(waiter);
      waiter.reject(new SlotUnavailableError(reason));
    }
    this.changes.notify();
  }

  /**
   * A request ended having used `usedTokens` (prompt + completion as the engine reported them): its flow's
   * service is corrected from the estimate charged when it started.
   */
  charge(ticket: FlowTicket, usedTokens: number): void {
    if (ticket.chargedTokens === 0) return;
    this.service.charge(ticket.flow, (usedTokens - ticket.chargedTokens) / ticket.weight);
    ticket.chargedTokens = usedTokens;
  }

  private start(started: Waiter[]): void {
    for (const waiter of started) {
      this.settle(waiter);
      this.charged(waiter.ticket);
      waiter.resolve();
    }
  }

  /** A request's first start charges its flow the estimate (a retry is not charged twice). */
  private charged(ticket: FlowTicket): void {
    if (ticket.chargedTokens !== 0 || ticket.estimatedTokens <= 0) return;
    ticket.chargedTokens = ticket.estimatedTokens;
    this.service.charge(ticket.flow, ticket.estimatedTokens / ticket.weight);
  }

  private settle(waiter: Waiter): void {
    waiter.cancelTimeout();
    waiter.abort?.listen(undefined);
  }
}

function dispatcherSettings(settings: QueueSettings) {
  return {
    policy: settings.policy ?? "least-attained",
    bands: settings.bands ?? 1,
    maxWaiting: settings.maxQueueSize,
    maxInflightPerFlow: settings.maxInflightPerAgent ?? 0,
  };
}
