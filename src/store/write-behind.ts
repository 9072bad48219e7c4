// Writes to Redis that nobody waits for: sent in order, queued while Redis is away, replayed when it is back.
import { UNAVAILABLE, type LuaScript, type RedisLink } from "./redis-link.js";

/** One script call: what a write becomes on the wire. */
export interface ScriptCall {
  readonly script: LuaScript;
  readonly keys: readonly string[];
  readonly args: readonly (string | number)[];
}

export interface WriteBehindOptions<W> {
  link: RedisLink;
  /** Writes waiting for Redis at most; past it the oldest are dropped (the replica's local view has them). */
  maxPending: number;
  /** The script call that makes `write` (each write carries the time of its decision, so replays are safe). */
  call(write: W): ScriptCall;
  /** The first time a write could not be sent (Redis away or failing): the replica accounts for it alone. */
  onQueued?(write: W): void;
  /** Redis ran the write; `queuedBefore` says onQueued() already accounted for it. */
  onWritten?(write: W, reply: unknown, queuedBefore: boolean): void;
}

interface Pending<W> {
  readonly write: W;
  readonly queuedBefore: boolean;
}

/**
 * One queue of write-backs over one link (bindings and budgets each have theirs). Writes leave on the link's
 * one connection in the order they were submitted; one that fails is queued, and the queue is replayed in
 * order each time the link becomes ready again.
 */
export class WriteBehind<W> {
  private pending: Pending<W>[] = [];

  constructor(private readonly options: WriteBehindOptions<W>) {
    options.link.onReady(() => this.replay());
  }

  /** Writes waiting for Redis to come back. */
  get size(): number {
    return this.pending.length;
  }

  /** Sends `write` without waiting for it (queued at once while the link is down). */
  submit(write: W): void {
    this.send(write, false);
  }

  /** Resolves when every write sent so far has been answered (or failed open and been queued). */
  flush(): Promise<void> {
    return this.options.link.flush();
  }

  private send(write: W, queuedBefore: boolean): void {
    const { link } = this.options;
    if (!link.up) {
      this.queue(write, queuedBefore);
      return;
    }
    const { script, keys, args } = this.options.call(write);
    link.send(script, keys, args, (reply) => {
      if (reply === UNAVAILABLE) this.queue(write, queuedBefore);
      else this.options.onWritten?.(write, reply, queuedBefore);
    });
  }

  private queue(write: W, queuedBefore: boolean): void {
    if (!queuedBefore) this.options.onQueued?.(write);
    this.pending.push({ write, queuedBefore: true });
    const { maxPending } = this.options;
    if (this.pending.length > maxPending) this.pending.splice(0, this.pending.length - maxPending);
  }

  /** Redis answers again: what was decided meanwhile goes out in order. */
  private replay(): void {
    const pending = this.pending;
    this.pending = [];
    for (const { write } of pending) this.send(write, true);
  }
}
