// The binding store of a replica with a shared store: the local table decides, Redis keeps replicas in step.
//
// The scheduler stays synchronous and pure: it reads and writes the local StickyTable through this class.
// Before a request's first selection the attempt loop awaits prepare(), one scripted round trip that loads
// the shared binding of the session (live, lapsed, broken or absent) into the local table and, when it is
// live, slides its TTL there and then: the hit path (the bulk of the traffic) costs that one command and
// nothing more. Every bind, break, and any refresh the lookup did not already make, is written back
// without waiting (in order, on one connection, each with the time of its decision, so a late write never
// overwrites a newer one). When Redis is slow or
// away nothing waits for it: the local table and rendezvous decide, writes queue and are replayed when it
// answers again. Broken bindings are counted here, not by the scheduler: by the replica whose script
// actually broke them, so the sum over replicas counts each once.
//
// With an invalidation subscription, a session whose lookup found it live is remembered as confirmed, and
// its next turns skip the lookup (no awaited round trip on a hit) until a script announces a change of its
// routing (a move or a break, by any replica), its backend's bindings break, the local binding lapses, or
// the subscription or the link drops (messages may have been missed: every confirmation goes). A lookup
// that was in flight while any invalidation arrived confirms nothing (its answer may predate the change).
import type { BindingLookup, BindingStore } from "./binding-store.js";
import type { Hash64 } from "./hash.js";
import { UNAVAILABLE } from "../store/redis-link.js";
import type { RedisSubscription } from "../store/redis-subscription.js";
import type { RedisBindings } from "./redis-bindings.js";
import { hashSession } from "./rendezvous.js";
import type { StickyTable } from "./sticky-table.js";

export interface BrokenRecorder {
  broken(tier: string, count: number): void;
}

type PendingWrite =
  | { kind: "write"; sessionId: string; backendId: string; expiresAtMs: number; atMs: number }
  | { kind: "break"; sessionId: string; backendId: string; atMs: number }
  | { kind: "breakBackend"; backendId: string; atMs: number };

/** Writes that wait for Redis to come back, at most; the oldest are dropped first (the local table has them). */
const MAX_PENDING = 100_000;

export interface ReplicatedBindingsOptions {
  local: StickyTable;
  remote: RedisBindings;
  recorder: BrokenRecorder;
  /** The tier of a backend id (for the broken counter's label), if the replica knows it. */
  tierOf: (backendId: string) => string | undefined;
  nowMs: () => number;
  /** The scheduler's sticky TTL (configure() follows a reload): bounds the refresh tolerance. */
  stickyTtlMs: number;
}

/** Confirmed sessions remembered at most; past it they are all forgotten (each then costs one lookup). */
const MAX_CONFIRMED = 100_000;

/**
 * A refresh is not written when it would extend the shared expiry by at most this much: a second, or a
 * hundredth of the TTL when that is shorter. So the shared TTL of a turn runs from its lookup, not its
 * selection (they are microseconds apart unless something slow, say the classifier, runs between). While
 * Redis is away every refresh is written back (queued) as before.
 */
export function refreshToleranceMs(stickyTtlMs: number): number {
  return Math.min(MAX_REFRESH_TOLERANCE_MS, stickyTtlMs / 100);
}

const MAX_REFRESH_TOLERANCE_MS = 1000;

export class ReplicatedBindings implements BindingStore {
  private readonly local: StickyTable;
  private readonly remote: RedisBindings;
  private pending: PendingWrite[] = [];
  private stickyTtlMs: number;
  /** Sessions whose local binding matched Redis's at a lookup, with no invalidation since. */
  private readonly confirmed = new Set<string>();
  /** Bumped by every invalidation and loss: a lookup that saw it change while in flight confirms nothing. */
  private generation = 0;
  private subscription: RedisSubscription | undefined;

  constructor(private readonly options: ReplicatedBindingsOptions) {
    this.local = options.local;
    this.remote = options.remote;
    this.stickyTtlMs = options.stickyTtlMs;
    this.remote.link.onReady(() => {
      this.forgetConfirmed();
      this.replay();
    });
  }

  /**
   * Trusts confirmed bindings while `subscription` is live. Its messages must be handed to invalidate(), and
   * its losses to forgetConfirmed().
   */
  useInvalidations(subscription: RedisSubscription): void {
    this.subscription = subscription;
  }

  /** A message of the invalidation channel: "s<session>" or "b<backend>" (see redis-bindings.ts). */
  invalidate(message: string): void {
    if (message.startsWith("s")) this.confirmed.delete(message.slice(1));
    else if (message.startsWith("b")) this.confirmed.clear();
    else return; // not an invalidation
    this.generation++;
  }

  /** Messages may have been missed (the subscription or the link dropped): nothing confirmed holds. */
  forgetConfirmed(): void {
    this.generation++;
    this.confirmed.clear();
  }

  /** Sessions whose next turn would skip the lookup. */
  get confirmedCount(): number {
    return this.confirmed.size;
  }

  private get trustsConfirmed(): boolean {
    return this.subscription?.live === true && this.remote.link.up;
  }

  /** True while the shared store answers (the binding_store_up gauge). */
  get shared(): boolean {
    return this.remote.link.up;
  }

  get pendingWrites(): number {
    return this.pending.length;
  }

  /**
   * Before a turn is routed: loads the session's shared binding into the local table and slides its TTL
   * if it is live (one round trip, bounded by the store's timeout). When Redis does not answer, the local
   * table stays as it is and decides alone.
   */
  prepare(sessionId: string): Promise<void> {
    return this.load(sessionId, true);
  }

  /** Loads the session's shared binding into the local table without refreshing it (the admin view). */
  peek(sessionId: string): Promise<void> {
    return this.load(sessionId, false);
  }

  private async load(sessionId: string, refresh: boolean): Promise<void> {
    const nowMs = this.options.nowMs();
    if (refresh && this.confirmed.has(sessionId)) {
      // Nothing changed its routing since it was confirmed: the local binding is Redis's, and the TTL
      // slides by the scheduler's refresh (written when it moves the expiry past the tolerance).
      if (this.trustsConfirmed && typeof this.local.get(sessionId, nowMs) === "string") return;
      this.confirmed.delete(sessionId);
    }
    const generation = this.generation;
    const remote = await this.remote.lookup(sessionId, nowMs, refresh);
    if (remote === UNAVAILABLE) return;
    switch (remote.state) {
      case "absent":
        this.local.delete(sessionId);
        return;
      case "live":
      case "expired":
        this.local.bind(sessionId, hashSession(sessionId), remote.backendId, remote.expiresAtMs, nowMs);
        if (remote.state === "live" && generation === this.generation && this.trustsConfirmed) {
          if (this.confirmed.size >= MAX_CONFIRMED) this.confirmed.clear();
          this.confirmed.add(sessionId);
        }
        return;
      case "broken": {
        if (remote.backendId === "") {
          // Broken by a request failure: which backend no longer matters, only that the next turn moves.
          this.local.delete(sessionId);
          this.local.bind(sessionId, hashSession(sessionId), BROKEN_PLACEHOLDER, nowMs + 1, nowMs);
          this.local.breakBinding(sessionId, BROKEN_PLACEHOLDER, nowMs);
        } else {
          this.local.bind(sessionId, hashSession(sessionId), remote.backendId, nowMs + 1, nowMs);
          this.local.breakBinding(sessionId, remote.backendId, nowMs);
        }
        return;
      }
    }
  }

  /** Resolves true once the shared store answers, false after `timeoutMs` (then the replica decides alone). */
  connected(timeoutMs: number): Promise<boolean> {
    return this.remote.link.connected(timeoutMs);
  }

  /** Resolves when every write-back sent so far has been answered (or failed open). */
  flush(): Promise<void> {
    return this.remote.link.flush();
  }

  /** A reloaded sticky TTL: how long lapsed bindings stay readable as lapsed. */
  configure(stickyTtlMs: number): void {
    this.remote.setTtlMs(stickyTtlMs);
    this.stickyTtlMs = stickyTtlMs;
  }

  async close(): Promise<void> {
    await Promise.all([this.remote.link.close(), this.subscription?.close()]);
  }

  get size(): number {
    return this.local.size;
  }

  get evictions(): number {
    return this.local.evictions;
  }

  get(sessionId: string, nowMs: number): BindingLookup {
    return this.local.get(sessionId, nowMs);
  }

  bind(sessionId: string, placement: Hash64, backendId: string, expiresAtMs: number, nowMs: number): void {
    this.confirmed.delete(sessionId);
    this.local.bind(sessionId, placement, backendId, expiresAtMs, nowMs);
    this.send({ kind: "write", sessionId, backendId, expiresAtMs, atMs: nowMs }, false);
  }

  /**
   * The scheduler's hit path. The local expiry is what Redis was last told or told us (prepare() loads it,
   * already slid by the lookup); a refresh that would move it by no more than the tolerance (either way)
   * is not written (nor applied locally, so the local table never runs ahead of what was sent), which
   * makes the hit path cost the lookup alone. Otherwise (the turn was routed long after its lookup) and whenever Redis is
   * away (its copy may be lost: a restarted Redis is empty) the refresh is written back like every other
   * decision, queued for replay if need be.
   */
  refresh(sessionId: string, expiresAtMs: number): void {
    const backendId = this.local.get(sessionId, -Infinity);
    const sharedExpiresAtMs = this.local.expiryOf(sessionId);
    if (
      typeof backendId === "string" &&
      sharedExpiresAtMs !== undefined &&
      this.remote.link.up &&
      Math.abs(expiresAtMs - sharedExpiresAtMs) <= refreshToleranceMs(this.stickyTtlMs)
    ) {
      this.local.refresh(sessionId, sharedExpiresAtMs); // most recently used; the expiry Redis holds
      return;
    }
    this.local.refresh(sessionId, expiresAtMs);
    if (typeof backendId !== "string") return;
    this.send({ kind: "write", sessionId, backendId, expiresAtMs, atMs: this.options.nowMs() }, false);
  }

  delete(sessionId: string): void {
    this.confirmed.delete(sessionId);
    this.local.delete(sessionId);
  }

  breakBinding(sessionId: string, backendId: string, nowMs: number): boolean {
    this.confirmed.delete(sessionId);
    const broke = this.local.breakBinding(sessionId, backendId, nowMs);
    if (broke) this.send({ kind: "break", sessionId, backendId, atMs: nowMs }, false);
    return broke;
  }

  breakBackend(backendId: string, nowMs: number): number {
    this.forgetConfirmed();
    const broken = this.local.breakBackend(backendId, nowMs);
    this.send({ kind: "breakBackend", backendId, atMs: nowMs }, false, broken);
    return broken;
  }

  countFor(backendId: string): number {
    return this.local.countFor(backendId);
  }

  /** Local only: the config refuses rebalance_on_backend_recovery with a shared store. */
  moveSessions(
    fromBackendId: string,
    toBackendId: string,
    nowMs: number,
    shouldMove: (placement: Hash64) => boolean,
  ): number {
    return this.local.moveSessions(fromBackendId, toBackendId, nowMs, shouldMove);
  }

  clear(): void {
    this.forgetConfirmed();
    this.local.clear();
  }

  sweep(nowMs: number, maxEntries: number): number {
    return this.local.sweep(nowMs, maxEntries);
  }

  /**
   * Sends one write-back. While Redis is away it is queued instead, and a break is counted here at once
   * (`localCount`: what the local table broke), since no script will; `counted` marks a queued break so
   * its replay does not count it again.
   */
  private send(write: PendingWrite, counted: boolean, localCount = 1): void {
    if (!this.remote.link.up) {
      if (!counted && write.kind !== "write") this.count(write.backendId, localCount);
      this.queue(write);
      return;
    }
    const requeue = () => {
      if (!counted && write.kind !== "write") this.count(write.backendId, localCount);
      this.queue(write);
    };
    switch (write.kind) {
      case "write":
        this.remote.write(write.sessionId, write.backendId, write.expiresAtMs, write.atMs, (written) => {
          if (written === UNAVAILABLE) requeue();
        });
        return;
      case "break":
        this.remote.breakBinding(write.sessionId, write.backendId, write.atMs, (broke) => {
          if (broke === UNAVAILABLE) requeue();
          else if (broke && !counted) this.count(write.backendId, 1);
        });
        return;
      case "breakBackend":
        this.remote.breakBackend(write.backendId, write.atMs, (broken) => {
          if (broken === UNAVAILABLE) requeue();
          else if (broken > 0 && !counted) this.count(write.backendId, broken);
        });
        return;
    }
  }

  private count(backendId: string, broken: number): void {
    if (broken <= 0) return;
    const tier = this.options.tierOf(backendId);
    if (tier !== undefined) this.options.recorder.broken(tier, broken);
  }

  private queue(write: PendingWrite): void {
    this.pending.push(write);
    if (this.pending.length > MAX_PENDING) this.pending.splice(0, this.pending.length - MAX_PENDING);
  }

  /** Redis answers again: what was decided meanwhile goes out in order (breaks already counted). */
  private replay(): void {
    const pending = this.pending;
    this.pending = [];
    for (const write of pending) this.send(write, true);
  }
}

/** A backend id no config can hold (ids never contain '|'): stands for "broken, whichever backend it was". */
const BROKEN_PLACEHOLDER = "|broken|";
