// The content keys an engine holds (src/kv-events/engine-index.ts): how many of its block hashes name each
// (normally one), each key's parent in its chain, and their order, least recently used first. One Map from key to
// slot, the rest in typed arrays, the order a doubly linked list through the slots.
//
// It replaces two Maps, a count per key and an insertion-ordered Map moved by delete-and-set. The gateway moves
// every block of a prompt when its request ends (a 130k-token prompt: 8,000 blocks) and counts every block an
// engine stores; there a delete left a hole the Map compacted later, and each block cost two lookups more
// (bench/README.md, "Long prompts"). Here a move relinks two slots and leaves the Map alone.

/** No slot: the end of the list. */
const NONE = -1;

export class HeldContentKeys {
  private readonly slotOf = new Map<number, number>();
  private keys = new Float64Array(0);
  private parents = new Float64Array(0);
  /** Block hashes of the engine naming the key. */
  private copies = new Int32Array(0);
  private previous = new Int32Array(0);
  private next = new Int32Array(0);
  /** Least recently used. */
  private head = NONE;
  /** Most recently used. */
  private tail = NONE;
  /** Slots freed by release(), reused before the arrays grow; chained through `next`. */
  private free = NONE;
  private used = 0;

  get size(): number {
    return this.slotOf.size;
  }

  has(key: number): boolean {
    return this.slotOf.has(key);
  }

  /** The key's parent, or undefined when it is not held. Leaves the order as it is. */
  get(key: number): number | undefined {
    const slot = this.slotOf.get(key);
    return slot === undefined ? undefined : this.parents[slot];
  }

  /** One more block hash names the key, now the most recently used (its parent replaced). */
  add(key: number, parent: number): void {
    let slot = this.slotOf.get(key);
    if (slot === undefined) {
      slot = this.allocate();
      this.slotOf.set(key, slot);
      this.keys[slot] = key;
      this.copies[slot] = 1;
    } else {
      this.unlink(slot);
      this.copies[slot]! += 1;
    }
    this.parents[slot] = parent;
    this.append(slot);
  }

  /** One block hash naming the key is gone; the key with it when it was the last. */
  release(key: number): void {
    const slot = this.slotOf.get(key);
    if (slot === undefined) return;
    if (this.copies[slot]! > 1) this.copies[slot]! -= 1;
    else this.remove(key, slot);
  }

  /** Makes a held key the most recently used; returns its parent, or undefined (not held, nothing changes). */
  touch(key: number): number | undefined {
    const slot = this.slotOf.get(key);
    if (slot === undefined) return undefined;
    if (slot !== this.tail) {
      this.unlink(slot);
      this.append(slot);
    }
    return this.parents[slot];
  }

  private remove(key: number, slot: number): void {
    this.slotOf.delete(key);
    this.unlink(slot);
    this.next[slot] = this.free;
    this.free = slot;
  }

  /** Forgets every key and gives the arrays back (removals one by one keep them at their largest size). */
  clear(): void {
    this.slotOf.clear();
    this.head = this.tail = this.free = NONE;
    this.used = 0;
    this.keys = new Float64Array(0);
    this.parents = new Float64Array(0);
    this.copies = new Int32Array(0);
    this.previous = new Int32Array(0);
    this.next = new Int32Array(0);
  }

  /** The keys, least recently used first. */
  *leastRecentFirst(): IterableIterator<number> {
    for (let slot = this.head; slot !== NONE; slot = this.next[slot]!) yield this.keys[slot]!;
  }

  private allocate(): number {
    if (this.free !== NONE) {
      const slot = this.free;
      this.free = this.next[slot]!;
      return slot;
    }
    if (this.used === this.keys.length) this.grow();
    return this.used++;
  }

  private grow(): void {
    const capacity = Math.max(1024, this.keys.length * 2);
    const keys = new Float64Array(capacity);
    const parents = new Float64Array(capacity);
    const copies = new Int32Array(capacity);
    const previous = new Int32Array(capacity);
    const next = new Int32Array(capacity);
    keys.set(this.keys);
    parents.set(this.parents);
    copies.set(this.copies);
    previous.set(this.previous);
    next.set(this.next);
    this.keys = keys;
    this.parents = parents;
    this.copies = copies;
    this.previous = previous;
    this.next = next;
  }

  private unlink(slot: number): void {
    const before = this.previous[slot]!;
    const after = this.next[slot]!;
    if (before === NONE) this.head = after;
    else this.next[before] = after;
    if (after === NONE) this.tail = before;
    else this.previous[after] = before;
  }

  private append(slot: number): void {
    this.previous[slot] = this.tail;
    this.next[slot] = NONE;
    if (this.tail === NONE) this.head = slot;
    else this.next[this.tail] = slot;
    this.tail = slot;
  }
}
