// What one engine holds in its prefix cache, rebuilt from its KV events: a bounded index of content keys.
//
// Like llm-d's indexer, the index never needs the engine's own hash seed: each stored block gets a content key
// computed here from the event's token ids, chained from its parent's key (src/sim/block-hash.ts, the same fast
// 53-bit chain the simulator's pool uses), and the engine's hash is only remembered to find the parent of a later
// event and to apply removals. A prompt is then matched by computing the same keys over its token ids.
// vLLM does not deduplicate physical blocks, so a hash may be stored twice and removed twice: copies are counted.
// Engine hashes are kept by their low 52 bits (a plain number, exact in a double): two different hashes that
// agree there (about 1e-4 odds over a million blocks) would share an entry.
// Bounded: past `maxBlocks` entries the oldest-stored keys are dropped first (the engine evicts least recently
// used blocks, and a block stored long ago and never stored again is the likeliest to be gone).
import { hashBlock, ROOT_BLOCK_HASH, saltRootHash } from "../sim/block-hash.js";
import { HeldContentKeys } from "./held-content-keys.js";
import type { BlockRemoved, BlockStored } from "./wire.js";

const LOW_52_BITS = (1n << 52n) - 1n;

/** An engine hash as this index keys it. */
export function engineHashKey(hash: bigint): number {
  return Number(hash & LOW_52_BITS);
}

/** The content key's root for a first block with these extra keys (cache_salt, LoRA): unsalted blocks share one. */
export function rootKeyOf(extraKeys: readonly unknown[] | null | undefined): number {
  if (extraKeys === null || extraKeys === undefined || extraKeys.length === 0) return ROOT_BLOCK_HASH;
  return saltRootHash(JSON.stringify(extraKeys));
}

export interface EngineIndexStats {
  /** Distinct engine hashes held. */
  readonly blocks: number;
  /** Blocks stored whose parent this index did not know (an event missed): keyed from the root, unmatched. */
  readonly orphanStores: number;
  /** Entries dropped by the bound. */
  readonly droppedBlocks: number;
}

export class EngineIndex {
  /**
   * Engine hash (low 52 bits) -> the content key of its block; insertion order is store order (the bound drops
   * from the front). A plain number value, no object per block: about 40% less memory.
   */
  private readonly byEngineHash = new Map<number, number>();
  /** Engine hashes stored more than once and not yet removed as often: copies beyond the first. */
  private readonly extraCopies = new Map<number, number>();
  /** Session id -> content keys its requests stored, in chain order (bounded with the sessions map). */
  private readonly sessions = new Map<string, number[]>();
  /**
   * Content keys held: how many engine hashes name each (normally 1), its parent in its chain (so a prompt known
   * only by its last held block, another replica's in shared-pending.ts, can be touched whole), least recently used
   * first: stored, or touched when a request that reused them ended (forecastRun() walks it as the engine's free
   * queue evicts).
   */
  private readonly held = new HeldContentKeys();
  /** Most blocks held at once: the engine's capacity as far as its events tell (read once it has evicted). */
  private peakBlocks = 0;
  /** Whether the engine has evicted a block (its cache filled up): until then it has free blocks to spare. */
  private evicting = false;
  private orphanStores = 0;
  private droppedBlocks = 0;
  /** The engine's block size, learned from its events (0 until the first BlockStored). */
  blockSizeTokens = 0;

  constructor(
    readonly maxBlocks: number,
    readonly maxSessions: number = 100_000,
    /**
     * Hears each content key the engine evicted (its last copy removed), as the removal is applied: the view cuts
     * the computed run of a pending prompt that lost a block before the engine scheduled it (pending-blocks.ts).
     */
    private readonly onEvicted?: (contentKey: number) => void,
  ) {}

  get size(): number {
    return this.byEngineHash.size;
  }

  stats(): EngineIndexStats {
    return {
      blocks: this.byEngineHash.size,
      orphanStores: this.orphanStores,
      droppedBlocks: this.droppedBlocks,
    };
  }

  /** Applies a BlockStored (GPU medium only: offloaded copies are not what a prefill reuses at once). */
  stored(event: BlockStored): void {
    if (event.medium !== null && event.medium !== "GPU") return;
    const size = event.blockSize;
    this.blockSizeTokens = size;
    let parentKey: number;
    if (event.parentBlockHash === null) parentKey = rootKeyOf(event.extraKeys?.[0]);
    else {
      const parent = this.byEngineHash.get(engineHashKey(event.parentBlockHash));
      if (parent === undefined) {
        // The parent's event was missed (or dropped by the bound): these blocks cannot be matched to a prompt.
        this.orphanStores += 1;
        return;
      }
      parentKey = parent;
    }
    const tokens = event.tokenIds;
    const chain: number[] = [];
    event.blockHashes.forEach((hash, index) => {
      const start = index * size;
      if (start + size > tokens.length) return;
      const contentKey = hashBlock(parentKey, tokens, start, size);
      const parentOfBlock = parentKey;
      parentKey = contentKey;
      chain.push(contentKey);
      const key = engineHashKey(hash);
      if (this.byEngineHash.has(key)) {
        this.extraCopies.set(key, (this.extraCopies.get(key) ?? 0) + 1);
        return;
      }
      this.byEngineHash.set(key, contentKey);
      this.held.add(contentKey, parentOfBlock);
    });
    if (this.byEngineHash.size > this.peakBlocks) this.peakBlocks = this.byEngineHash.size;
    if (event.sessionId !== null) this.recordSession(event.sessionId, event.parentBlockHash, chain);
    this.enforceBound();
  }

  /** Applies a BlockRemoved: one copy of each named block is gone. */
  removed(event: BlockRemoved): void {
    if (event.medium !== null && event.medium !== "GPU") return;
    this.evicting = true;
    for (const hash of event.blockHashes) {
      const key = engineHashKey(hash);
      const contentKey = this.byEngineHash.get(key);
      if (contentKey === undefined) continue;
      const extra = this.extraCopies.get(key);
      if (extra === undefined) {
        this.drop(key, contentKey);
        if (this.onEvicted !== undefined && !this.held.has(contentKey)) this.onEvicted(contentKey);
      } else if (extra <= 1) this.extraCopies.delete(key);
      else this.extraCopies.set(key, extra - 1);
    }
  }

  /** Applies AllBlocksCleared (or a restart of the engine): it holds nothing. */
  cleared(): void {
    this.byEngineHash.clear();
    this.extraCopies.clear();
    this.sessions.clear();
    this.held.clear();
  }

  /**
   * A request that used the first `count` of these keys ended: the engine put its blocks back in its free queue,
   * tail first (vLLM frees a request's blocks in reverse, so its tail is evicted before its prefix).
   */
  touch(keys: ArrayLike<number>, count: number): void {
    for (let index = Math.min(count, keys.length) - 1; index >= 0; index--) {
      this.held.touch(keys[index] as number);
    }
  }

  /**
   * Like touch(), for a prompt known by the content key of its last block held here (`lastKey`): that block and
   * its ancestors, walked by their parents, become the most recently used, the first block last.
   */
  touchChain(lastKey: number): void {
    let key = lastKey;
    for (let steps = this.held.size; steps > 0; steps--) {
      const parent = this.held.touch(key);
      if (parent === undefined) return;
      key = parent;
    }
  }

  /**
   * The chain of `length` content keys ending at `lastKey`, walked back by the parents the index keeps, first
   * block first; undefined when the index does not hold every one of them (one was evicted, or never reported).
   */
  chainTo(lastKey: number, length: number): Float64Array | undefined {
    const chain = new Float64Array(length);
    let key = lastKey;
    for (let at = length - 1; at >= 0; at--) {
      const parent = this.held.get(key);
      if (parent === undefined) return undefined;
      chain[at] = key;
      key = parent;
    }
    return chain;
  }

  /**
   * Blocks the engine can still store before it must evict, as far as the gateway knows: its capacity (the most
   * it held before it first evicted; until then `maxBlocks`, the bound the operator sets to the engine's cache)
   * less what it holds. Not unbounded before the first eviction: a prefill queued on an engine that has not yet
   * filled may fill it, and the engine then evicts what the forecast had taken as safe (seen in the kvevents study:
   * 53,000 tokens over-predicted on an engine that first filled behind a 100k-token prefill). With max_blocks left
   * at its default (a million) the room is as good as unbounded.
   */
  roomBlocks(): number {
    const capacity = this.evicting ? Math.min(this.peakBlocks, this.maxBlocks) : this.maxBlocks;
    return Math.max(0, capacity - this.byEngineHash.size);
  }

  /**
   * How much of a held leading run of `keys` (the first `run`) is left after the engine evicts `evictions`
   * blocks in least-recently-used order, skipping blocks `inUse` (referenced by a running request, which the
   * engine cannot evict). Walks at most until the evictions are spent.
   */
  forecastRun(
    keys: ArrayLike<number>,
    run: number,
    evictions: number,
    inUse: (key: number) => boolean,
  ): number {
    if (evictions <= 0 || run <= 0) return run;
    const position = new Map<number, number>();
    for (let index = 0; index < run; index++) position.set(keys[index] as number, index);
    let left = evictions;
    let kept = run;
    for (const key of this.held.leastRecentFirst()) {
      if (left <= 0) break;
      if (inUse(key)) continue;
      left -= 1;
      const at = position.get(key);
      if (at !== undefined && at < kept) kept = at;
    }
    return kept;
  }

  /** Whether the engine holds a block with this content key. */
  holds(contentKey: number): boolean {
    return this.held.has(contentKey);
  }

  /**
   * How many of `keys` (a prompt's content keys, in order) this engine holds as a leading run, the first `from`
   * taken as held (blocks known to be coming: src/kv-events/pending-blocks.ts).
   */
  matchedBlocks(keys: ArrayLike<number>, from = 0): number {
    let matched = Math.min(from, keys.length);
    while (matched < keys.length && this.held.has(keys[matched] as number)) matched++;
    return matched;
  }

  /** How many leading blocks of the session's stored chain this engine still holds. */
  sessionBlocks(sessionId: string): number {
    const chain = this.sessions.get(sessionId);
    return chain === undefined ? 0 : this.matchedBlocks(chain);
  }

  private recordSession(sessionId: string, parentHash: bigint | null, chain: readonly number[]): void {
    let keys = this.sessions.get(sessionId);
    if (keys === undefined || parentHash === null) keys = [];
    else {
      // The new blocks follow their parent: keep the session's chain up to it (a conversation that was edited
      // continues from an earlier block).
      const parentKey = this.byEngineHash.get(engineHashKey(parentHash));
      const at = parentKey === undefined ? -1 : keys.lastIndexOf(parentKey);
      keys = at < 0 ? [] : keys.slice(0, at + 1);
    }
    for (const key of chain) keys.push(key);
    this.sessions.delete(sessionId); // re-inserted last: the map's order is least recently stored first
    this.sessions.set(sessionId, keys);
    if (this.sessions.size > this.maxSessions) {
      const oldest = this.sessions.keys().next().value;
      if (oldest !== undefined) this.sessions.delete(oldest);
    }
  }

  private drop(key: number, contentKey: number): void {
    this.byEngineHash.delete(key);
    this.extraCopies.delete(key);
    this.held.release(contentKey);
  }

  private enforceBound(): void {
    while (this.byEngineHash.size > this.maxBlocks) {
      const first = this.byEngineHash.entries().next().value;
      if (first === undefined) return;
      this.drop(first[0], first[1]);
      this.droppedBlocks += 1;
    }
  }
}
