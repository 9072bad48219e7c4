// Per-request KV bookkeeping over the block pool: prefix lookup, slot allocation, caching full blocks, freeing.
import { hashBlock } from "./block-hash.js";
import { BlockPool } from "./block-pool.js";
import type { KvEventRecorder } from "./kv-event-recorder.js";
import type { EngineRequest } from "./request.js";

export class KvCacheManager {
  readonly pool: BlockPool;

  /** `events`: records vLLM's KV events of this cache (only when the engine publishes them). */
  constructor(
    capacityBlocks: number,
    readonly blockSizeTokens: number,
    readonly events?: KvEventRecorder,
  ) {
    this.pool = new BlockPool(capacityBlocks, events ? (blockId) => events.blockEvicted(blockId) : undefined);
  }

  /** Extends the request's key chain over every full block of its known tokens. */
  private hashFullBlocks(request: EngineRequest, upToBlocks: number): void {
    const hashes = request.blockHashes;
    const size = this.blockSizeTokens;
    for (let index = hashes.length; index < upToBlocks; index++) {
      const parent = index === 0 ? request.rootHash : (hashes[index - 1] as number);
      hashes.push(hashBlock(parent, request.tokens, index * size, size));
    }
  }

  /**
   * The longest chain of cached full blocks that starts the request's tokens. As in vLLM, the last token is always
   * recomputed (its logits are needed), so a fully cached sequence still leaves its last block to compute.
   */
  findCachedPrefix(request: EngineRequest): number[] {
    const maxBlocks = Math.floor((request.tokens.length - 1) / this.blockSizeTokens);
    this.hashFullBlocks(request, maxBlocks);
    const found: number[] = [];
    for (let index = 0; index < maxBlocks; index++) {
      const blockId = this.pool.lookup(request.blockHashes[index] as number);
      if (blockId === undefined) break;
      found.push(blockId);
    }
    return found;
  }

  /**
   * Makes room for `numNewTokens` more tokens after the request's computed ones (and after `cachedPrefix`, the
   * blocks a first scheduling reuses). Returns false, changing nothing, when the free queue cannot cover it.
   */
  allocateSlots(request: EngineRequest, numNewTokens: number, cachedPrefix: readonly number[] = []): boolean {
    const size = this.blockSizeTokens;
    const computed = request.numComputedTokens + cachedPrefix.length * size;
    const blocksNeeded = Math.ceil((computed + numNewTokens) / size);
    const newBlocks = blocksNeeded - request.blockIds.length - cachedPrefix.length;
    let revived = 0;
    for (const blockId of cachedPrefix) if (this.pool.refCount(blockId) === 0) revived += 1;
    if (newBlocks + revived > this.pool.numFreeBlocks) return false;
    // Pin the reused prefix first, so the allocations below cannot evict it.
    for (const blockId of cachedPrefix) {
      this.pool.touch(blockId);
      request.blockIds.push(blockId);
    }
    request.numCachedBlocks += cachedPrefix.length;
    for (let i = 0; i < newBlocks; i++) request.blockIds.push(this.pool.allocate());
    return true;
  }

  /**
   * Publishes every full block of the request's first `numTokens` tokens, so other requests can reuse it. As
   * vLLM's allocate_slots does (its `cache_blocks` up to `num_computed_tokens + num_new_tokens`, capped by the
   * request's known tokens), the scheduler calls it when it allocates a step's slots, before the step computes
   * them: a request admitted later in the same step finds the blocks this step computes (the engine writes every
   * token's KV before attention reads the cache).
   */
  cacheBlocks(request: EngineRequest, numTokens: number): void {
    const fullBlocks = Math.floor(Math.min(numTokens, request.tokens.length) / this.blockSizeTokens);
    if (fullBlocks <= request.numCachedBlocks) return;
    this.hashFullBlocks(request, fullBlocks);
    for (let index = request.numCachedBlocks; index < fullBlocks; index++) {
      this.pool.register(request.blockIds[index] as number, request.blockHashes[index] as number);
    }
    this.events?.blocksStored(request, request.numCachedBlocks, fullBlocks);
    request.numCachedBlocks = fullBlocks;
  }

  /** vLLM's reset_prefix_cache: false (nothing changed) while blocks are in use. */
  resetPrefixCache(): boolean {
    if (!this.pool.resetPrefixCache()) return false;
    this.events?.allCleared();
    return true;
  }

  /** Unpins the request's blocks; tail blocks go first in the free queue, so they are evicted before the prefix. */
  free(request: EngineRequest): void {
    const ids = request.blockIds;
    for (let index = ids.length - 1; index >= 0; index--) this.pool.release(ids[index] as number);
    ids.length = 0;
    request.numCachedBlocks = 0;
  }
}
