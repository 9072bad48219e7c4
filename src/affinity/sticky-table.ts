// The in-process sticky-binding table: bounded, LRU-evicting, with an index per backend, all in typed arrays.
//
// Layout. One 48-byte record per binding in a single ArrayBuffer (expiry, the session's keyed hash, its
// placement hash, backend, and the links of two intrusive doubly linked lists: the recency list for eviction
// and expiry reclaim, and its backend's list so breaking a backend's bindings walks only those). An
// open-addressing index (linear probing, at most half full, backward-shift deletion so churn never grows
// or degrades it) maps the keyed hash to a record. A lookup reads one index bucket and one record; nothing
// lives on the V8 heap per binding, so 1,000,000 bindings take ~64 MB and no garbage is made at any rate.
//
// Identity. A session is known by a 64-bit keyed hash of its id (see keyed-hash.ts), not by the id itself:
// the id strings would cost more than everything else together. Two live ids with the same 64-bit hash are
// astronomically unlikely (~3e-8 among 1,000,000 live sessions) and could not be forced by a client without
// the per-process key; even then the only effect is a session starting on another's engine with a cold cache.
import { BROKEN, EXPIRED, type BindingLookup } from "./binding-store.js";
import type { Hash64 } from "./hash.js";
import { KeyedHasher } from "./keyed-hash.js";

const NONE = -1;
/** The backend field of a record whose binding was broken (kept so the next request can say why it moved). */
const TOMBSTONE = 0xffff;
const MAX_BACKENDS = TOMBSTONE; // indices 0..65534
const INITIAL_SLOTS = 1024;
/** Expired bindings reclaimed on each insert: enough to keep up with any arrival rate, bounded per call. */
const RECLAIM_PER_INSERT = 4;

// Record fields, in 32-bit words. The expiry (a float64) takes words 0-1; the hit path touches words 0-6.
const RECORD_WORDS = 12;
const EXPIRY_F64 = 0; // in float64s from the record's start
const KEY_LO = 2;
const BACKEND = 3;
const RECENCY_PREV = 4;
const RECENCY_NEXT = 5; // also the free list's link
const KEY_HI = 6;
const PLACEMENT_HI = 7;
const PLACEMENT_LO = 8;
const BACKEND_PREV = 9;
const BACKEND_NEXT = 10;

export class StickyTable {
  private readonly hasher: KeyedHasher;
  // The last id hashed, so the refresh or bind that follows a get() of the same id does not hash it again.
  private lastId: string | undefined;
  private lastHi = 0;
  private lastLo = 0;

  private words: Int32Array;
  private expiries: Float64Array;
  /** Bucket i: words 2i (record + 1, 0 = empty) and 2i + 1 (the record's KEY_HI, so probing skips records). */
  private buckets: Int32Array;
  private bucketMask: number;
  private capacity: number;
  private count = 0;
  private used = 0; // records ever handed out (the free list holds returned ones)
  private freeHead = NONE;
  /** Most recently used record; the tail end holds the oldest. */
  private recencyHead = NONE;
  private recencyTail = NONE;

  private readonly backendIds: string[] = [];
  private readonly indexByBackend = new Map<string, number>();
  private readonly backendHead: number[] = [];
  private readonly backendCount: number[] = [];
  /** Indices given back by backends no record points at any more, for the next new backend id. */
  private readonly freeBackendIndices: number[] = [];
  private evicted = 0;

  /** `hashKey`: two 32-bit words of secret randomness, fixed for the table's life (see keyed-hash.ts). */
  constructor(
    readonly maxBindings: number,
    hashKey: readonly [number, number],
  ) {
    if (!Number.isInteger(maxBindings) || maxBindings < 1) throw new RangeError("maxBindings must be >= 1");
    this.hasher = new KeyedHasher(hashKey);
    this.capacity = Math.min(INITIAL_SLOTS, maxBindings);
    this.words = new Int32Array(this.capacity * RECORD_WORDS);
    this.expiries = new Float64Array(this.words.buffer);
    this.buckets = new Int32Array(2 * bucketCountFor(this.capacity));
    this.bucketMask = bucketCountFor(this.capacity) - 1;
  }

  /** Sessions remembered: live bindings plus expired and broken ones not yet reclaimed (bounded by the cap). */
  get size(): number {
    return this.count;
  }

  /** Bindings dropped because the table was full (least recently used first). */
  get evictions(): number {
    return this.evicted;
  }

  /** Looks a session up without refreshing it; an expired binding is never returned as live. */
  get(sessionId: string, nowMs: number): BindingLookup {
    const record = this.find(sessionId);
    if (record === NONE) return undefined;
    const backend = this.words[record * RECORD_WORDS + BACKEND]!;
    if (backend === TOMBSTONE) return BROKEN;
    if (this.expiries[expiryIndex(record)]! <= nowMs) return EXPIRED;
    return this.backendIds[backend];
  }

  /** When the session's binding expires (or expired), if it has one that is not broken. */
  expiryOf(sessionId: string): number | undefined {
    const record = this.find(sessionId);
    if (record === NONE || this.words[record * RECORD_WORDS + BACKEND] === TOMBSTONE) return undefined;
    return this.expiries[expiryIndex(record)];
  }

  /**
   * Binds or rebinds a session until `expiresAtMs`, making it the most recently used. `placement` is the
   * session's rendezvous hash, kept so that moveSessions() can re-place bindings without their ids.
   */
  bind(sessionId: string, placement: Hash64, backendId: string, expiresAtMs: number, nowMs: number): void {
    const backend = this.backendIndexOf(backendId);
    let record = this.find(sessionId);
    if (record === NONE) {
      this.sweep(nowMs, RECLAIM_PER_INSERT);
      record = this.allocate();
      const base = record * RECORD_WORDS;
      this.words[base + KEY_HI] = this.lastHi;
      this.words[base + KEY_LO] = this.lastLo;
      this.words[base + PLACEMENT_HI] = placement.hi;
      this.words[base + PLACEMENT_LO] = placement.lo;
      this.insertIntoIndex(record);
      this.linkBackend(record, backend);
      this.linkRecencyHead(record);
      this.count++;
    } else {
      const current = this.words[record * RECORD_WORDS + BACKEND]!;
      if (current !== backend) {
        if (current !== TOMBSTONE) this.unlinkBackend(record);
        this.linkBackend(record, backend);
      }
      this.moveToRecencyHead(record);
    }
    this.expiries[expiryIndex(record)] = expiresAtMs;
  }

  /** Extends a live binding until `expiresAtMs` and makes it the most recently used (the hit path). */
  refresh(sessionId: string, expiresAtMs: number): void {
    const record = this.find(sessionId);
    if (record === NONE || this.words[record * RECORD_WORDS + BACKEND] === TOMBSTONE) return;
    this.moveToRecencyHead(record);
    this.expiries[expiryIndex(record)] = expiresAtMs;
  }

  /** Forgets a session entirely. */
  delete(sessionId: string): void {
    const record = this.find(sessionId);
    if (record !== NONE) this.release(record);
  }

  /** Breaks the session's binding if (and only if) it is live and points at `backendId`; true if it did. */
  breakBinding(sessionId: string, backendId: string, nowMs: number): boolean {
    const record = this.find(sessionId);
    if (record === NONE) return false;
    const backend = this.indexByBackend.get(backendId);
    if (backend === undefined || this.words[record * RECORD_WORDS + BACKEND] !== backend) return false;
    if (this.expiries[expiryIndex(record)]! <= nowMs) return false;
    this.unlinkBackend(record);
    return true;
  }

  /** Breaks every live binding to `backendId`; returns how many. Touches only that backend's bindings. */
  breakBackend(backendId: string, nowMs: number): number {
    const backend = this.indexByBackend.get(backendId);
    if (backend === undefined) return 0;
    let broken = 0;
    let record = this.backendHead[backend]!;
    while (record !== NONE) {
      const next = this.words[record * RECORD_WORDS + BACKEND_NEXT]!;
      if (this.expiries[expiryIndex(record)]! <= nowMs) {
        this.release(record); // lapsed already: not a binding the outage broke
      } else {
        this.unlinkBackend(record);
        broken++;
      }
      record = next;
    }
    return broken;
  }

  /** Live-or-unreclaimed bindings that point at `backendId`. */
  countFor(backendId: string): number {
    const backend = this.indexByBackend.get(backendId);
    return backend === undefined ? 0 : this.backendCount[backend]!;
  }

  /**
   * Rebinds to `toBackendId` each live binding of `fromBackendId` whose placement hash `shouldMove` accepts,
   * keeping its expiry and recency (a move is not a use); returns how many moved.
   */
  moveSessions(
    fromBackendId: string,
    toBackendId: string,
    nowMs: number,
    shouldMove: (placement: Hash64) => boolean,
  ): number {
    const from = this.indexByBackend.get(fromBackendId);
    if (from === undefined || fromBackendId === toBackendId) return 0;
    const to = this.backendIndexOf(toBackendId);
    const moving: number[] = []; // decided first: relinking while walking the list would lose its thread
    for (let record = this.backendHead[from]!; record !== NONE;) {
      const base = record * RECORD_WORDS;
      const placement = {
        hi: this.words[base + PLACEMENT_HI]! >>> 0,
        lo: this.words[base + PLACEMENT_LO]! >>> 0,
      };
      if (this.expiries[expiryIndex(record)]! > nowMs && shouldMove(placement)) {
        moving.push(record);
      }
      record = this.words[base + BACKEND_NEXT]!;
    }
    for (const record of moving) {
      this.unlinkBackend(record);
      this.linkBackend(record, to);
    }
    return moving.length;
  }

  /** Forgets every session. */
  clear(): void {
    this.buckets.fill(0);
    this.count = 0;
    this.used = 0;
    this.freeHead = NONE;
    this.recencyHead = NONE;
    this.recencyTail = NONE;
    this.backendHead.fill(NONE);
    this.backendCount.fill(0);
  }

  /** Reclaims up to `maxEntries` expired bindings, oldest first, without scanning live ones; returns how many. */
  sweep(nowMs: number, maxEntries: number): number {
    // Every binding gets the same TTL from its last use, so the least recently used is also the first to
    // expire: reclaiming from the tail finds every expired binding without looking at a live one. (After a
    // TTL change by reload the order is only approximate; get() still never returns an expired binding.)
    let reclaimed = 0;
    while (
      reclaimed < maxEntries &&
      this.recencyTail !== NONE &&
      this.expiries[expiryIndex(this.recencyTail)]! <= nowMs
    ) {
      this.release(this.recencyTail);
      reclaimed++;
    }
    return reclaimed;
  }

  /** The record of a session id, or NONE; leaves the id's keyed hash in lastHi/lastLo. */
  private find(sessionId: string): number {
    if (sessionId !== this.lastId) {
      this.hasher.hash(sessionId);
      this.lastId = sessionId;
      this.lastHi = this.hasher.hi;
      this.lastLo = this.hasher.lo;
    }
    const hi = this.lastHi;
    const lo = this.lastLo;
    const buckets = this.buckets;
    const mask = this.bucketMask;
    for (let bucket = hi & mask; ; bucket = (bucket + 1) & mask) {
      const entry = buckets[2 * bucket]!;
      if (entry === 0) return NONE;
      if (buckets[2 * bucket + 1] === hi && this.words[(entry - 1) * RECORD_WORDS + KEY_LO] === lo) {
        return entry - 1;
      }
    }
  }

  private insertIntoIndex(record: number): void {
    const hi = this.words[record * RECORD_WORDS + KEY_HI]!;
    const buckets = this.buckets;
    const mask = this.bucketMask;
    let bucket = hi & mask;
    while (buckets[2 * bucket] !== 0) bucket = (bucket + 1) & mask;
    buckets[2 * bucket] = record + 1;
    buckets[2 * bucket + 1] = hi;
  }

  /** Backward-shift deletion: later entries of the probe run move up, so no tombstones ever accumulate. */
  private removeFromIndex(record: number): void {
    const buckets = this.buckets;
    const mask = this.bucketMask;
    let hole = this.words[record * RECORD_WORDS + KEY_HI]! & mask;
    while (buckets[2 * hole] !== record + 1) hole = (hole + 1) & mask;
    for (let next = (hole + 1) & mask; buckets[2 * next] !== 0; next = (next + 1) & mask) {
      const home = buckets[2 * next + 1]! & mask;
      // The entry may fill the hole only if its home is not between the hole and where it sits now.
      if (((next - home) & mask) >= ((next - hole) & mask)) {
        buckets[2 * hole] = buckets[2 * next]!;
        buckets[2 * hole + 1] = buckets[2 * next + 1]!;
        hole = next;
      }
    }
    buckets[2 * hole] = 0;
  }

  private backendIndexOf(backendId: string): number {
    let index = this.indexByBackend.get(backendId);
    if (index === undefined) {
      // Engine ids come and go over a process's life (pods churn): when every index has been handed out,
      // those of backends no record points at any more (broken, moved or reclaimed) are taken back.
      if (this.freeBackendIndices.length === 0 && this.backendIds.length >= MAX_BACKENDS) {
        this.reclaimBackendIndices();
      }
      index = this.freeBackendIndices.pop();
      if (index === undefined) {
        index = this.backendIds.length;
        if (index >= MAX_BACKENDS) {
          throw new RangeError(`more than ${MAX_BACKENDS} backends hold bindings at once`);
        }
        this.backendIds.push(backendId);
        this.backendHead.push(NONE);
        this.backendCount.push(0);
      } else {
        this.backendIds[index] = backendId;
        this.backendHead[index] = NONE;
        this.backendCount[index] = 0;
      }
      this.indexByBackend.set(backendId, index);
    }
    return index;
  }

  /**
   * Frees every backend index with no record on its list. Safe: records point at a backend only through
   * its list (a broken record holds the tombstone), so an empty list means nothing refers to the index.
   */
  private reclaimBackendIndices(): void {
    for (let index = 0; index < this.backendIds.length; index++) {
      if (this.backendCount[index] !== 0 || this.backendHead[index] !== NONE) continue;
      const id = this.backendIds[index]!;
      if (this.indexByBackend.get(id) !== index) continue;
      this.indexByBackend.delete(id);
      this.freeBackendIndices.push(index);
    }
  }

  private allocate(): number {
    if (this.freeHead !== NONE) {
      const record = this.freeHead;
      this.freeHead = this.words[record * RECORD_WORDS + RECENCY_NEXT]!;
      return record;
    }
    if (this.used < this.capacity) return this.used++;
    if (this.capacity < this.maxBindings) {
      this.grow(Math.min(this.capacity * 2, this.maxBindings));
      return this.used++;
    }
    // Full: the least recently used binding makes room.
    this.release(this.recencyTail);
    this.evicted++;
    return this.allocate();
  }

  private release(record: number): void {
    this.removeFromIndex(record);
    if (this.words[record * RECORD_WORDS + BACKEND] !== TOMBSTONE) this.unlinkBackend(record);
    this.unlinkRecency(record);
    this.words[record * RECORD_WORDS + RECENCY_NEXT] = this.freeHead;
    this.freeHead = record;
    this.count--;
  }

  /** Called only when every record is in use, so every record goes into the new index. */
  private grow(capacity: number): void {
    const words = new Int32Array(capacity * RECORD_WORDS);
    words.set(this.words);
    this.words = words;
    this.expiries = new Float64Array(words.buffer);
    this.buckets = new Int32Array(2 * bucketCountFor(capacity));
    this.bucketMask = bucketCountFor(capacity) - 1;
    for (let record = 0; record < this.used; record++) this.insertIntoIndex(record);
    this.capacity = capacity;
  }

  private moveToRecencyHead(record: number): void {
    if (this.recencyHead === record) return;
    this.unlinkRecency(record);
    this.linkRecencyHead(record);
  }

  private linkRecencyHead(record: number): void {
    const base = record * RECORD_WORDS;
    this.words[base + RECENCY_PREV] = NONE;
    this.words[base + RECENCY_NEXT] = this.recencyHead;
    if (this.recencyHead !== NONE) this.words[this.recencyHead * RECORD_WORDS + RECENCY_PREV] = record;
    this.recencyHead = record;
    if (this.recencyTail === NONE) this.recencyTail = record;
  }

  private unlinkRecency(record: number): void {
    const base = record * RECORD_WORDS;
    const prev = this.words[base + RECENCY_PREV]!;
    const next = this.words[base + RECENCY_NEXT]!;
    if (prev !== NONE) this.words[prev * RECORD_WORDS + RECENCY_NEXT] = next;
    else this.recencyHead = next;
    if (next !== NONE) this.words[next * RECORD_WORDS + RECENCY_PREV] = prev;
    else this.recencyTail = prev;
  }

  private linkBackend(record: number, backend: number): void {
    const base = record * RECORD_WORDS;
    const head = this.backendHead[backend]!;
    this.words[base + BACKEND] = backend;
    this.words[base + BACKEND_PREV] = NONE;
    this.words[base + BACKEND_NEXT] = head;
    if (head !== NONE) this.words[head * RECORD_WORDS + BACKEND_PREV] = record;
    this.backendHead[backend] = record;
    this.backendCount[backend]!++;
  }

  /** Takes the record off its backend's list and leaves a tombstone (the caller may then relink or release). */
  private unlinkBackend(record: number): void {
    const base = record * RECORD_WORDS;
    const backend = this.words[base + BACKEND]!;
    const prev = this.words[base + BACKEND_PREV]!;
    const next = this.words[base + BACKEND_NEXT]!;
    if (prev !== NONE) this.words[prev * RECORD_WORDS + BACKEND_NEXT] = next;
    else this.backendHead[backend] = next;
    if (next !== NONE) this.words[next * RECORD_WORDS + BACKEND_PREV] = prev;
    this.backendCount[backend]!--;
    this.words[base + BACKEND] = TOMBSTONE;
  }
}

/** Where a record's expiry sits in the Float64Array view of the records. */
function expiryIndex(record: number): number {
  return record * (RECORD_WORDS / 2) + EXPIRY_F64;
}

/** Buckets for `capacity` records: a power of two at least twice as many, so probe runs stay short. */
function bucketCountFor(capacity: number): number {
  let buckets = 2;
  while (buckets < 2 * capacity) buckets *= 2;
  return buckets;
}
