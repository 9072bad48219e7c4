// The binding store shared by replicas through Redis, failing open to this replica's local table.
//
// lookup() is one scripted round trip that reads the session's shared binding (live, lapsed, broken or
// absent) and, when it routes a turn and the binding is live, slides its TTL there and then: the hit path
// (the bulk of the traffic) costs that one command and nothing more. The answer is also kept in a local
// StickyTable. Every bind, break, and any refresh the lookup did not already make, is applied to the local
// table and written to Redis (in order, on one connection, each with the time of its decision, so a late
// write never overwrites a newer one): binds and breaks, which change where a session goes, are written
// through (awaited, with their invalidation sent, before the turn goes on: read-your-writes, docs/affinity.md);
// refreshes are written back without waiting (src/store/write-behind.ts). When Redis is slow or away
// nothing waits for it: lookups answer from the local table, writes queue and are replayed when it answers
// again. Broken bindings are counted by the replica whose script actually broke them, so the sum over
// replicas counts each once (while Redis is away, by the replica that broke them locally).
//
// With an invalidation subscription, a session whose lookup found it live is remembered as confirmed, and
// its next turns skip the lookup (no awaited round trip on a hit) until a script announces a change of its
// routing (a move or a break, by any replica), its backend's bindings break, the local binding lapses, or
// the subscription or the link drops (messages may have been missed: every confirmation goes). A lookup
// that was in flight while any invalidation arrived confirms nothing (its answer may predate the change).
import {
  BROKEN,
  EXPIRED,
  type BindingEffect,
  type BindingLookup,
  type BindingStore,
  type BrokenListener,
  type LookupPurpose,
} from "./binding-store.js";
import { scanBindingPage, type BindingCursor, type BindingScanPage } from "./binding-scan.js";
import type { Hash64 } from "./hash.js";
import { MemoryBindingStore } from "./memory-bindings.js";
import { UNAVAILABLE } from "../store/redis-link.js";
import type { RedisSubscription } from "../store/redis-subscription.js";
import { WriteBehind, type ScriptCall } from "../store/write-behind.js";
import { afterReadyIo, writeThrough } from "../store/write-through.js";
import type { RedisBindings } from "./redis-bindings.js";
import { hashSession } from "./rendezvous.js";
import type { StickyTable } from "./sticky-table.js";

/** A write-back; a break carries what the local table broke, counted there if Redis never runs it. */
type BindingWrite =
  | { kind: "write"; sessionId: string; backendId: string; expiresAtMs: number; atMs: number }
  | { kind: "break"; sessionId: string; backendId: string; tier: string; atMs: number; localCount: number }
  | { kind: "breakBackend"; backendId: string; tier: string; atMs: number; localCount: number };

/** Writes that wait for Redis to come back, at most; the oldest are dropped first (the local table has them). */
const MAX_PENDING = 100_000;

export interface RedisBindingStoreOptions {
  /** This replica's view: answers while Redis is away. */
  local: StickyTable;
  remote: RedisBindings;
  /** The sticky TTL (configure() follows a reload): bounds the refresh tolerance. */
  stickyTtlMs: number;
}

/** Confirmed sessions remembered at most; past it they are all forgotten (each then costs one lookup). */
const MAX_CONFIRMED = 100_000;

/**
 * A refresh is not written when it would extend the shared expiry by at most this much: a second, or a
 * hundredth of the TTL when that is shorter. So the shared TTL of a turn runs from its lookup, not its
 * placement (they are microseconds apart unless something slow, say the classifier, runs between). While
 * Redis is away every refresh is written back (queued) as before.
 */
export function refreshToleranceMs(stickyTtlMs: number): number {
  return Math.min(MAX_REFRESH_TOLERANCE_MS, stickyTtlMs / 100);
}

const MAX_REFRESH_TOLERANCE_MS = 1000;

/**
 * A memory store (this replica's local view: sweep, moveSessions and countFor stay on it) wrapped with Redis.
 * Outside the BindingStore contract it offers only what its wiring and its own tests need (invalidations and
 * the counts below); the gateway holds it as a BindingStore.
 */
export class RedisBindingStore implements BindingStore {
  /** The local view; its table is read and written directly where a lookup loads Redis's answer. */
  private readonly local: MemoryBindingStore;
  private readonly table: StickyTable;
  /** Where broken bindings are counted (the placement service's recorder). */
  private broken: BrokenListener = () => undefined;
  private readonly remote: RedisBindings;
  private readonly writes: WriteBehind<BindingWrite>;
  private stickyTtlMs: number;
  /** Sessions whose local binding matched Redis's at a lookup, with no invalidation since. */
  private readonly confirmed = new Set<string>();
  /** Bumped by every invalidation and loss: a lookup that saw it change while in flight confirms nothing. */
  private generation = 0;
  private subscription: RedisSubscription | undefined;

  constructor(options: RedisBindingStoreOptions) {
    this.local = new MemoryBindingStore(options.local);
    this.table = options.local;
    this.remote = options.remote;
    this.stickyTtlMs = options.stickyTtlMs;
    this.remote.link.onReady(() => this.forgetConfirmed());
    this.writes = new WriteBehind<BindingWrite>({
      link: this.remote.link,
      maxPending: MAX_PENDING,
      call: (write) => this.callOf(write),
      // No script will count what the local table broke meanwhile: it is counted here, once.
      onQueued: (write) => {
        if (write.kind !== "write" && write.localCount > 0) this.broken(write.tier, write.localCount);
      },
      onWritten: (write, reply, queuedBefore) => {
        if (write.kind === "write" || queuedBefore || typeof reply !== "number" || reply <= 0) return;
        this.broken(write.tier, reply);
      },
    });
  }

  private callOf(write: BindingWrite): ScriptCall {
    switch (write.kind) {
      case "write":
        return this.remote.write(write.sessionId, write.backendId, write.expiresAtMs, write.atMs);
      case "break":
        return this.remote.breakBinding(write.sessionId, write.backendId, write.atMs);
      case "breakBackend":
        return this.remote.breakBackend(write.backendId, write.atMs);
    }
  }

  /**
   * Read-your-writes (docs/affinity.md): a change of a session's routing (a bind or a break) is in Redis,
   * and its invalidation sent to every replica, before the decision's apply() resolves, so before the turn
   * is even sent to its engine. When Redis does not answer in time the write is queued like a write-back.
   */
  private async writeThrough(write: Extract<BindingWrite, { kind: "write" | "break" }>): Promise<void> {
    if (!this.remote.link.up) return this.writes.submit(write);
    const reply = await writeThrough(this.remote.link, this.callOf(write));
    if (reply === UNAVAILABLE) this.writes.submit(write);
    else if (write.kind === "break" && typeof reply === "number" && reply > 0) this.broken(write.tier, reply);
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
    return this.writes.size;
  }

  /**
   * The session's shared binding (one round trip, bounded by the store's timeout), kept in the local table;
   * routing a turn slides a live binding's TTL in the same script. When Redis does not answer, the local
   * table answers alone.
   */
  async lookup(sessionId: string, nowMs: number, purpose: LookupPurpose): Promise<BindingLookup> {
    const route = purpose === "route";
    if (route && this.confirmed.has(sessionId)) {
      // Invalidations that reached this replica before the turn did are read first (read-your-writes: a
      // rebind's invalidation is sent before the turn that made it is answered, see writeThrough()).
      await afterReadyIo();
    }
    if (route && this.confirmed.has(sessionId)) {
      // Nothing changed its routing since it was confirmed: the local binding is Redis's, and the TTL
      // slides by the decision's refresh (written when it moves the expiry past the tolerance).
      const bound = this.table.get(sessionId, nowMs);
      if (this.trustsConfirmed && typeof bound === "string") return bound;
      this.confirmed.delete(sessionId);
    }
    const generation = this.generation;
    const remote = await this.remote.lookup(sessionId, nowMs, route);
    if (remote === UNAVAILABLE) return this.table.get(sessionId, nowMs);
    switch (remote.state) {
      case "absent":
        this.table.delete(sessionId);
        return undefined;
      case "live":
      case "expired":
        this.table.bind(sessionId, hashSession(sessionId), remote.backendId, remote.expiresAtMs, nowMs);
        if (remote.state === "expired") return EXPIRED;
        if (generation === this.generation && this.trustsConfirmed) {
          if (this.confirmed.size >= MAX_CONFIRMED) this.confirmed.clear();
          this.confirmed.add(sessionId);
        }
        return remote.backendId;
      case "broken":
        // The local table keeps it broken (so it says so while Redis is away) when it knows the backend;
        // a binding broken by a request failure no longer names it, and is forgotten locally.
        this.table.delete(sessionId);
        if (remote.backendId !== "") {
          this.table.bind(sessionId, hashSession(sessionId), remote.backendId, nowMs + 1, nowMs);
          this.table.breakBinding(sessionId, remote.backendId, nowMs);
        }
        return BROKEN;
    }
  }

  apply(effects: readonly BindingEffect[], nowMs: number): Promise<void> {
    const through: Promise<void>[] = [];
    for (const effect of effects) {
      switch (effect.kind) {
        case "bind":
          this.confirmed.delete(effect.sessionId);
          this.table.bind(effect.sessionId, effect.placement, effect.backendId, effect.expiresAtMs, nowMs);
          through.push(
            this.writeThrough({
              kind: "write",
              sessionId: effect.sessionId,
              backendId: effect.backendId,
              expiresAtMs: effect.expiresAtMs,
              atMs: nowMs,
            }),
          );
          break;
        case "refresh":
          this.refresh(effect.sessionId, effect.expiresAtMs, nowMs);
          break;
        case "break": {
          this.confirmed.delete(effect.sessionId);
          const localCount = this.table.breakBinding(effect.sessionId, effect.backendId, nowMs) ? 1 : 0;
          // Sent even when the local table did not hold it: another replica's binding to the failed
          // backend is Redis's to break (the script breaks only a live binding to that backend, once).
          through.push(this.writeThrough({ ...effect, atMs: nowMs, localCount }));
          break;
        }
      }
    }
    return through.length === 0 ? Promise.resolve() : Promise.all(through).then(() => undefined);
  }

  /**
   * The hit path. The local expiry is what Redis was last told or told us (the lookup loads it, already
   * slid); a refresh that would move it by no more than the tolerance (either way) is not written (nor
   * applied locally, so the local table never runs ahead of what was sent), which makes the hit path cost
   * the lookup alone. Otherwise (the turn was placed long after its lookup) and whenever Redis is away (its
   * copy may be lost: a restarted Redis is empty) the refresh is written back like every other decision.
   */
  private refresh(sessionId: string, expiresAtMs: number, nowMs: number): void {
    const backendId = this.table.get(sessionId, -Infinity);
    const sharedExpiresAtMs = this.table.expiryOf(sessionId);
    if (
      typeof backendId === "string" &&
      sharedExpiresAtMs !== undefined &&
      this.remote.link.up &&
      Math.abs(expiresAtMs - sharedExpiresAtMs) <= refreshToleranceMs(this.stickyTtlMs)
    ) {
      this.table.refresh(sessionId, sharedExpiresAtMs); // most recently used; the expiry Redis holds
      return;
    }
    this.table.refresh(sessionId, expiresAtMs);
    if (typeof backendId !== "string") return;
    this.writes.submit({ kind: "write", sessionId, backendId, expiresAtMs, atMs: nowMs });
  }

  breakBackend(backendId: string, tier: string, nowMs: number): Promise<number> {
    this.forgetConfirmed();
    const localCount = this.table.breakBackend(backendId, nowMs);
    this.writes.submit({ kind: "breakBackend", backendId, tier, atMs: nowMs, localCount });
    return Promise.resolve(localCount);
  }

  /** Local only (a reload turned affinity off): Redis's bindings lapse by themselves. */
  clear(): void {
    this.forgetConfirmed();
    this.table.clear();
  }

  sweep(nowMs: number, maxEntries: number): Promise<number> {
    return this.local.sweep(nowMs, maxEntries);
  }

  moveSessions(
    fromBackendId: string,
    toBackendId: string,
    nowMs: number,
    shouldMove: (placement: Hash64) => boolean,
  ): Promise<number> {
    return this.local.moveSessions(fromBackendId, toBackendId, nowMs, shouldMove);
  }

  countFor(backendId: string): number {
    return this.local.countFor(backendId);
  }

  /** Every replica's bindings, a page at a time, read from Redis (the local view holds only this replica's). */
  scanSessions(from: BindingCursor | undefined, limit: number, nowMs: number): Promise<BindingScanPage> {
    return scanBindingPage(
      (cursor, count, pending) => this.remote.scanStep(cursor, count, pending, nowMs),
      from,
      limit,
    );
  }

  onBroken(listener: BrokenListener): void {
    this.broken = listener;
  }

  /** Resolves true once the shared store answers, false after `timeoutMs` (then the replica decides alone). */
  connected(timeoutMs: number): Promise<boolean> {
    return this.remote.link.connected(timeoutMs);
  }

  /** Resolves when every write-back sent so far has been answered (or failed open). */
  flush(): Promise<void> {
    return this.writes.flush();
  }

  /** A reloaded sticky TTL: how far lookups slide, how long lapsed bindings stay readable as lapsed. */
  configure(stickyTtlMs: number): void {
    this.remote.setTtlMs(stickyTtlMs);
    this.stickyTtlMs = stickyTtlMs;
  }

  async close(): Promise<void> {
    await Promise.all([this.remote.link.close(), this.subscription?.close()]);
  }
}
