// The in-process sticky-binding table: bounded, LRU-evicting, with an index per backend, in flat typed arrays.
//
// Layout: a Map from session id to a slot number, and one typed array per field, indexed by slot. Slots sit
// on two intrusive doubly linked lists: the recency list (eviction, expiry reclaim) and their backend's list
// (so breaking a backend's bindings walks only those). This costs ~35 bytes per binding beyond the Map entry
// and the key string, where an object per binding plus a Set per backend would cost several times that.
import { BROKEN, EXPIRED, type BindingLookup, type BindingStore } from "./binding-store.js";

const NONE = -1;
/** backendIndex value of a slot whose binding was broken (kept so the next request can say why it moved). */
const TOMBSTONE = 0xffff;
const MAX_BACKENDS = TOMBSTONE; // indices 0..65534
const INITIAL_SLOTS = 1024;
/** Expired bindings reclaimed on each insert: enough to keep up with any arrival rate, bounded per call. */
const RECLAIM_PER_INSERT = 4;

export class StickyTable implements BindingStore {
  private readonly slotBySession = new Map<string, number>();
  private sessionBySlot: (string | undefined)[] = [];
  private backendIndex: Uint16Array;
  private expiresAtMs: Float64Array;
  private recencyPrev: Int32Array;
  private recencyNext: Int32Array;
  private backendPrev: Int32Array;
  private backendNext: Int32Array;
  private capacity: number;
  private used = 0; // slots ever handed out (the free list holds returned ones)
  private freeHead = NONE;
  /** Most recently used slot; its tail end holds the oldest. */
  private recencyHead = NONE;
  private recencyTail = NONE;

  private readonly backendIds: string[] = [];
  private readonly indexByBackend = new Map<string, number>();
  private readonly backendHead: number[] = [];
  private readonly backendCount: number[] = [];
  private evicted = 0;

  constructor(readonly maxBindings: number) {
    if (!Number.isInteger(maxBindings) || maxBindings < 1) throw new RangeError("maxBindings must be >= 1");
    this.capacity = Math.min(INITIAL_SLOTS, maxBindings);
    this.backendIndex = new Uint16Array(this.capacity);
    this.expiresAtMs = new Float64Array(this.capacity);
    this.recencyPrev = new Int32Array(this.capacity);
    this.recencyNext = new Int32Array(this.capacity);
    this.backendPrev = new Int32Array(this.capacity);
    this.backendNext = new Int32Array(this.capacity);
  }

  get size(): number {
    return this.slotBySession.size;
  }

  get evictions(): number {
    return this.evicted;
  }

  get(sessionId: string, nowMs: number): BindingLookup {
    const slot = this.slotBySession.get(sessionId);
    if (slot === undefined) return undefined;
    const backend = this.backendIndex[slot]!;
    if (backend === TOMBSTONE) return BROKEN;
    if (this.expiresAtMs[slot]! <= nowMs) return EXPIRED;
    return this.backendIds[backend];
  }

  set(sessionId: string, backendId: string, expiresAtMs: number, nowMs: number): void {
    const backend = this.backendIndexOf(backendId);
    let slot = this.slotBySession.get(sessionId);
    if (slot === undefined) {
      this.sweep(nowMs, RECLAIM_PER_INSERT);
      slot = this.allocateSlot();
      this.slotBySession.set(sessionId, slot);
      this.sessionBySlot[slot] = sessionId;
      this.linkBackend(slot, backend);
      this.linkRecencyHead(slot);
    } else {
      const current = this.backendIndex[slot]!;
      if (current !== backend) {
        if (current !== TOMBSTONE) this.unlinkBackend(slot);
        this.linkBackend(slot, backend);
      }
      if (this.recencyHead !== slot) {
        this.unlinkRecency(slot);
        this.linkRecencyHead(slot);
      }
    }
    this.expiresAtMs[slot] = expiresAtMs;
  }

  delete(sessionId: string): void {
    const slot = this.slotBySession.get(sessionId);
    if (slot !== undefined) this.releaseSlot(slot);
  }

  breakBinding(sessionId: string, backendId: string, nowMs: number): boolean {
    const slot = this.slotBySession.get(sessionId);
    if (slot === undefined) return false;
    const backend = this.indexByBackend.get(backendId);
    if (backend === undefined || this.backendIndex[slot] !== backend) return false;
    if (this.expiresAtMs[slot]! <= nowMs) return false;
    this.unlinkBackend(slot);
    return true;
  }

  breakBackend(backendId: string, nowMs: number): number {
    const backend = this.indexByBackend.get(backendId);
    if (backend === undefined) return 0;
    let broken = 0;
    let slot = this.backendHead[backend]!;
    while (slot !== NONE) {
      const next = this.backendNext[slot]!;
      if (this.expiresAtMs[slot]! <= nowMs) {
        this.releaseSlot(slot); // lapsed already: not a binding the outage broke
      } else {
        this.unlinkBackend(slot);
        broken++;
      }
      slot = next;
    }
    return broken;
  }

  countFor(backendId: string): number {
    const backend = this.indexByBackend.get(backendId);
    return backend === undefined ? 0 : this.backendCount[backend]!;
  }

  forEachSession(backendId: string, nowMs: number, visit: (sessionId: string) => void): void {
    const backend = this.indexByBackend.get(backendId);
    if (backend === undefined) return;
    for (let slot = this.backendHead[backend]!; slot !== NONE; slot = this.backendNext[slot]!) {
      if (this.expiresAtMs[slot]! > nowMs) visit(this.sessionBySlot[slot]!);
    }
  }

  clear(): void {
    this.slotBySession.clear();
    this.sessionBySlot = [];
    this.used = 0;
    this.freeHead = NONE;
    this.recencyHead = NONE;
    this.recencyTail = NONE;
    this.backendHead.fill(NONE);
    this.backendCount.fill(0);
  }

  sweep(nowMs: number, maxEntries: number): number {
    // Every binding gets the same TTL from its last use, so the least recently used is also the first to
    // expire: reclaiming from the tail finds every expired binding without looking at a live one. (After a
    // TTL change by reload the order is only approximate; get() still never returns an expired binding.)
    let reclaimed = 0;
    while (
      reclaimed < maxEntries &&
      this.recencyTail !== NONE &&
      this.expiresAtMs[this.recencyTail]! <= nowMs
    ) {
      this.releaseSlot(this.recencyTail);
      reclaimed++;
    }
    return reclaimed;
  }

  private backendIndexOf(backendId: string): number {
    let index = this.indexByBackend.get(backendId);
    if (index === undefined) {
      index = this.backendIds.length;
      if (index >= MAX_BACKENDS) throw new RangeError(`more than ${MAX_BACKENDS} backends`);
      this.backendIds.push(backendId);
      this.indexByBackend.set(backendId, index);
      this.backendHead.push(NONE);
      this.backendCount.push(0);
    }
    return index;
  }

  private allocateSlot(): number {
    if (this.freeHead !== NONE) {
      const slot = this.freeHead;
      this.freeHead = this.recencyNext[slot]!;
      return slot;
    }
    if (this.used < this.capacity) return this.used++;
    if (this.capacity < this.maxBindings) {
      this.grow(Math.min(this.capacity * 2, this.maxBindings));
      return this.used++;
    }
    // Full: the least recently used binding makes room.
    const victim = this.recencyTail;
    this.releaseSlot(victim);
    this.evicted++;
    return this.allocateSlot();
  }

  private releaseSlot(slot: number): void {
    this.slotBySession.delete(this.sessionBySlot[slot]!);
    this.sessionBySlot[slot] = undefined;
    if (this.backendIndex[slot] !== TOMBSTONE) this.unlinkBackend(slot);
    this.unlinkRecency(slot);
    this.recencyNext[slot] = this.freeHead;
    this.freeHead = slot;
  }

  private grow(capacity: number): void {
    const widen = <T extends Uint16Array | Float64Array | Int32Array>(old: T, make: (n: number) => T): T => {
      const next = make(capacity);
      next.set(old);
      return next;
    };
    this.backendIndex = widen(this.backendIndex, (n) => new Uint16Array(n));
    this.expiresAtMs = widen(this.expiresAtMs, (n) => new Float64Array(n));
    this.recencyPrev = widen(this.recencyPrev, (n) => new Int32Array(n));
    this.recencyNext = widen(this.recencyNext, (n) => new Int32Array(n));
    this.backendPrev = widen(this.backendPrev, (n) => new Int32Array(n));
    this.backendNext = widen(this.backendNext, (n) => new Int32Array(n));
    this.capacity = capacity;
  }

  private linkRecencyHead(slot: number): void {
    this.recencyPrev[slot] = NONE;
    this.recencyNext[slot] = this.recencyHead;
    if (this.recencyHead !== NONE) this.recencyPrev[this.recencyHead] = slot;
    this.recencyHead = slot;
    if (this.recencyTail === NONE) this.recencyTail = slot;
  }

  private unlinkRecency(slot: number): void {
    const prev = this.recencyPrev[slot]!;
    const next = this.recencyNext[slot]!;
    if (prev !== NONE) this.recencyNext[prev] = next;
    else this.recencyHead = next;
    if (next !== NONE) this.recencyPrev[next] = prev;
    else this.recencyTail = prev;
  }

  private linkBackend(slot: number, backend: number): void {
    this.backendIndex[slot] = backend;
    const head = this.backendHead[backend]!;
    this.backendPrev[slot] = NONE;
    this.backendNext[slot] = head;
    if (head !== NONE) this.backendPrev[head] = slot;
    this.backendHead[backend] = slot;
    this.backendCount[backend]!++;
  }

  /** Takes the slot off its backend's list and leaves a tombstone (the caller may then relink or release). */
  private unlinkBackend(slot: number): void {
    const backend = this.backendIndex[slot]!;
    const prev = this.backendPrev[slot]!;
    const next = this.backendNext[slot]!;
    if (prev !== NONE) this.backendNext[prev] = next;
    else this.backendHead[backend] = next;
    if (next !== NONE) this.backendPrev[next] = prev;
    this.backendCount[backend]!--;
    this.backendIndex[slot] = TOMBSTONE;
  }
}
