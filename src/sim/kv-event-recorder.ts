// Collects the KV events of the simulated block pool as vLLM's BlockPool emits them, until the engine step ends.
//
// vLLM emits BlockStored once per caching call (the newly full blocks of one request, with their parent's hash and
// tokens), BlockRemoved once per evicted cached block, and AllBlocksCleared on a prefix-cache reset. It does not
// deduplicate physical blocks: two requests computing the same block both store it, and each copy is removed
// when it is evicted. The scheduler takes the events after each step and publishes them as one batch.
import type { BlockStored, KvEvent } from "../kv-events/wire.js";
import { MEDIUM_GPU } from "../kv-events/wire.js";
import type { EngineRequest } from "./request.js";
import { externalBlockHash, type BlockExtraKeys, type VllmBlockHasher } from "./vllm-block-hash.js";

export class KvEventRecorder {
  private pending: KvEvent[] = [];
  /** The wire hash each physical block was stored under (undefined: not a stored block). */
  private readonly storedHash: (bigint | undefined)[];

  constructor(
    readonly hasher: VllmBlockHasher,
    readonly blockSizeTokens: number,
    capacityBlocks: number,
  ) {
    this.storedHash = new Array<bigint | undefined>(capacityBlocks).fill(undefined);
  }

  /** The request's vLLM digests for its first `upToBlocks` full blocks (computed once, like vLLM's block hasher). */
  private digestsOf(request: EngineRequest, upToBlocks: number): Uint8Array[] {
    const digests = request.vllmBlockDigests;
    const size = this.blockSizeTokens;
    for (let index = digests.length; index < upToBlocks; index++) {
      digests.push(
        this.hasher.hashBlock(
          index === 0 ? undefined : digests[index - 1],
          request.tokens,
          index * size,
          size,
          this.extraKeysOf(request, index),
        ),
      );
    }
    return digests;
  }

  /** vLLM's extra keys: the cache_salt goes into the first block only (no LoRA, no multimodal input here). */
  private extraKeysOf(request: EngineRequest, blockIndex: number): BlockExtraKeys {
    return blockIndex === 0 && request.cacheSalt !== undefined ? [request.cacheSalt] : null;
  }

  /** The request's blocks [from, to) were just cached in the physical blocks `blockIds[from..to)`. */
  blocksStored(request: EngineRequest, from: number, to: number): void {
    if (to <= from) return;
    const digests = this.digestsOf(request, to);
    const size = this.blockSizeTokens;
    const hashes: bigint[] = [];
    const extraKeys: BlockExtraKeys[] = [];
    for (let index = from; index < to; index++) {
      const hash = externalBlockHash(digests[index] as Uint8Array);
      hashes.push(hash);
      extraKeys.push(this.extraKeysOf(request, index));
      this.storedHash[request.blockIds[index] as number] = hash;
    }
    const event: BlockStored = {
      type: "BlockStored",
      blockHashes: hashes,
      parentBlockHash: from === 0 ? null : externalBlockHash(digests[from - 1] as Uint8Array),
      tokenIds: request.tokens.slice(from * size, to * size),
      blockSize: size,
      loraId: null,
      medium: MEDIUM_GPU,
      loraName: null,
      extraKeys,
      groupIdx: 0,
      kvCacheSpecKind: "full_attention",
      kvCacheSpecSlidingWindow: null,
      sessionId: request.sessionId ?? null,
    };
    this.pending.push(event);
  }

  /** A cached block was taken for new contents. */
  blockEvicted(blockId: number): void {
    const hash = this.storedHash[blockId];
    if (hash === undefined) return;
    this.storedHash[blockId] = undefined;
    this.pending.push({ type: "BlockRemoved", blockHashes: [hash], medium: MEDIUM_GPU, groupIdx: 0 });
  }

  /** Every cached block was dropped (a prefix-cache reset). */
  allCleared(): void {
    this.storedHash.fill(undefined);
    this.pending.push({ type: "AllBlocksCleared" });
  }

  /** The events since the last call, oldest first. */
  take(): KvEvent[] {
    const events = this.pending;
    this.pending = [];
    return events;
  }
}
