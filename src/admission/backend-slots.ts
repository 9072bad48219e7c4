// Enforces each backend's max_inflight: a request takes a slot or waits in one bounded, time-limited queue.
import { GatewayError } from "../core/errors.js";

export interface SlotHolder {
  readonly id: string;
  maxInflight: number;
  inflight: number;
  /** Requests waiting here for a slot on it: kept up to date by BackendSlots, read by placement. */
  queued: number;
}

export interface QueueSettings {
  /** Waiting requests across all backends; 0 means no waiting at all. */
  maxQueueSize: number;
  queueTimeoutMs: number;
}

/** What withdraws a waiter (the gateway's AttemptAbort): it tells its one listener why, at most once. */
export interface WaitAbort {
  listen(listener: ((why: Error) => void) | undefined): void;
}

interface Waiter {
  resolve: () => void;
  reject: (err: Error) => void;
  timer: NodeJS.Timeout;
  abort: WaitAbort | undefined;
  holder: SlotHolder;
}

/** Rejects queued requests whose backend went down, so they fail over instead of waiting it out. */
export class SlotUnavailableError extends GatewayError {
  override name = "SlotUnavailableError";
  constructor(message: string) {
    super("backend_unavailable", message);
  }
}

export class BackendSlots {
  private readonly queues = new Map<string, Waiter[]>();
  private waiting = 0;

  constructor(private settings: QueueSettings) {}

  get depth(): number {
    return this.waiting;
  }

  configure(settings: QueueSettings): void {
    this.settings = settings;
  }

  /**
   * Takes a slot on `backend`: at once (returns undefined) when one is free and nobody waits, else a promise
   * that resolves in FIFO order. Rejects with 503 queue_full / queue_timeout, SlotUnavailableError when the
   * backend goes down, or the abort's reason when the attempt is stopped while it waits.
   */
  acquire(backend: SlotHolder, abort?: WaitAbort): Promise<void> | undefined {
    const queue = this.queues.get(backend.id);
    if (backend.inflight < backend.maxInflight && (queue === undefined || queue.length === 0)) {
      backend.inflight++;
      return undefined; // the common case: no promise, no allocation
    }
    if (this.waiting >= this.settings.maxQueueSize) {
      return Promise.reject(
        new GatewayError("queue_full", `backend ${backend.id} is at max_inflight and the queue is full`, {
          retryAfterSeconds: 1,
        }),
      );
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        abort,
        holder: backend,
        timer: setTimeout(() => {
          this.remove(backend.id, waiter);
          reject(
            new GatewayError(
              "queue_timeout",
              `waited ${this.settings.queueTimeoutMs} ms for a slot on ${backend.id}`,
              {
                retryAfterSeconds: Math.ceil(this.settings.queueTimeoutMs / 1000),
              },
            ),
          );
        }, this.settings.queueTimeoutMs),
      };
      abort?.listen((why) => {
        this.remove(backend.id, waiter);
        clearTimeout(waiter.timer);
        reject(why);
      });
      let list = this.queues.get(backend.id);
      if (list === undefined) {
        list = [];
        this.queues.set(backend.id, list);
      }
      list.push(waiter);
      this.waiting++;
      backend.queued++;
    });
  }

  /** Returns a slot: handed straight to the next waiter of that backend, if any. */
  release(backend: SlotHolder): void {
    const queue = this.queues.get(backend.id);
    const next = queue?.shift();
    if (next === undefined || backend.inflight > backend.maxInflight) {
      if (next !== undefined) queue!.unshift(next);
      backend.inflight--;
      return;
    }
    this.waiting--;
    backend.queued--;
    this.settle(next);
    next.resolve();
  }

  /** Hands free slots to waiters (after a reload raised max_inflight). */
  pump(backend: SlotHolder): void {
    const queue = this.queues.get(backend.id);
    while (queue !== undefined && queue.length > 0 && backend.inflight < backend.maxInflight) {
      const next = queue.shift()!;
      this.waiting--;
      backend.queued--;
      backend.inflight++;
      this.settle(next);
      next.resolve();
    }
  }

  /** The backend went down or was removed: its waiters fail over elsewhere. */
  rejectWaiters(backendId: string, reason: string): void {
    const queue = this.queues.get(backendId);
    if (queue === undefined) return;
    this.queues.delete(backendId);
    for (const waiter of queue) {
      this.waiting--;
      waiter.holder.queued--;
      this.settle(waiter);
      waiter.reject(new SlotUnavailableError(reason));
    }
  }

  private remove(backendId: string, waiter: Waiter): void {
    const queue = this.queues.get(backendId);
    const at = queue?.indexOf(waiter) ?? -1;
    if (at < 0) return;
    queue!.splice(at, 1);
    this.waiting--;
    waiter.holder.queued--;
    waiter.abort?.listen(undefined);
  }

  private settle(waiter: Waiter): void {
    clearTimeout(waiter.timer);
    waiter.abort?.listen(undefined);
  }
}
