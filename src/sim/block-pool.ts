// The physical KV blocks: reference counts, the hash -> block index of cached blocks, and the LRU free queue.
//
// As in vLLM, a block whose last user finished keeps its contents and its key: it sits in the free queue and can
// be revived by a later request with the same prefix until an allocation takes it from the head of the queue,
// which is the only moment a cached block is evicted.

const NONE = -1;

export class BlockPool {
  readonly capacityBlocks: number;
  private readonly refCounts: Int32Array;
  /** Key of each block's contents; NaN while the block is not (or no longer) a cached full block. */
  private readonly keys: Float64Array;
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private readonly inFreeQueue: Uint8Array;
  private head = NONE;
  private tail = NONE;
  private freeCount = 0;
  private readonly blockByKey = new Map<number, number>();
  /** Cached blocks dropped to make room, since the pool was built. */
  evictedBlocks = 0;

  /** `onEvict` hears of each cached block taken for new contents (the KV-event recorder). */
  constructor(
    capacityBlocks: number,
    private readonly onEvict?: (blockId: number) => void,
  ) {
    if (!Number.isInteger(capacityBlocks) || capacityBlocks < 1) {
      throw new RangeError(`KV capacity must be a positive whole number of blocks (got ${capacityBlocks})`);
    }
    this.capacityBlocks = capacityBlocks;
    this.refCounts = new Int32Array(capacityBlocks);
    this.keys = new Float64Array(capacityBlocks).fill(Number.NaN);
    this.prev = new Int32Array(capacityBlocks);
    this.next = new Int32Array(capacityBlocks);
    this.inFreeQueue = new Uint8Array(capacityBlocks);
    for (let id = 0; id < capacityBlocks; id++) this.pushTail(id);
  }

  /** Blocks an allocation may take: never-used, released, and cached-but-unreferenced ones. */
  get numFreeBlocks(): number {
    return this.freeCount;
  }

  /** Fraction of blocks pinned by running requests: vLLM's kv_cache_usage_perc. */
  get usage(): number {
    return 1 - this.freeCount / this.capacityBlocks;
  }

  get numCachedBlocks(): number {
    return this.blockByKey.size;
  }

  refCount(blockId: number): number {
    return this.refCounts[blockId] as number;
  }

  /** The cached block holding the contents with this key, if any. */
  lookup(key: number): number | undefined {
    return this.blockByKey.get(key);
  }

  /** Takes one more reference on a block (reviving it from the free queue if it was unreferenced). */
  touch(blockId: number): void {
    if (this.inFreeQueue[blockId] === 1) this.unlink(blockId);
    this.refCounts[blockId] = (this.refCounts[blockId] as number) + 1;
  }

  /** Takes the least recently freed block, evicting whatever it cached. Caller checked numFreeBlocks. */
  allocate(): number {
    const blockId = this.head;
    if (blockId === NONE) throw new RangeError("no free KV block");
    this.unlink(blockId);
    const key = this.keys[blockId] as number;
    if (!Number.isNaN(key)) {
      if (this.blockByKey.get(key) === blockId) this.blockByKey.delete(key);
      this.keys[blockId] = Number.NaN;
      this.evictedBlocks += 1;
      this.onEvict?.(blockId);
    }
    this.refCounts[blockId] = 1;
    return blockId;
  }

  /** Drops one reference; an unreferenced block goes to the tail of the free queue with its contents intact. */
  release(blockId: number): void {
    const count = (this.refCounts[blockId] as number) - 1;
    if (count < 0) throw new RangeError(`KV block ${blockId} released more often than taken`);
    this.refCounts[blockId] = count;
    if (count === 0) this.pushTail(blockId);
  }

  /** Records that a full, computed block holds the contents with this key. */
  register(blockId: number, key: number): void {
    const previous = this.keys[blockId] as number;
    if (!Number.isNaN(previous) && this.blockByKey.get(previous) === blockId)
      this.blockByKey.delete(previous);
    this.keys[blockId] = key;
    // A concurrent request may have computed the same contents first; the index keeps that one.
    if (!this.blockByKey.has(key)) this.blockByKey.set(key, blockId);
  }

  /**
   * Drops every cached block's contents (vLLM's reset_prefix_cache). Refused, changing nothing, while a running
   * request holds blocks, as vLLM refuses it.
   */
  resetPrefixCache(): boolean {
    if (this.freeCount < this.capacityBlocks) return false;
    this.keys.fill(Number.NaN);
    this.blockByKey.clear();
    return true;
  }

  private pushTail(blockId: number): void {
    this.prev[blockId] = this.tail;
    this.next[blockId] = NONE;
    if (this.tail === NONE) this.head = blockId;
    else this.next[this.tail] = blockId;
    this.tail = blockId;
    this.inFreeQueue[blockId] = 1;
    this.freeCount += 1;
  }

  private unlink(blockId: number): void {
    const before = this.prev[blockId] as number;
    const after = this.next[blockId] as number;
    if (before === NONE) this.head = after;
    else this.next[before] = after;
    if (after === NONE) this.tail = before;
    else this.prev[after] = before;
    this.inFreeQueue[blockId] = 0;
    this.freeCount -= 1;
  }
}
