// A BlockStored event as an engine publishes it (GPU medium, full attention, no LoRA), for the KV-event tests.
import type { BlockStored } from "../../src/kv-events/wire.js";

export function storedEvent(
  hashes: bigint[],
  parent: bigint | null,
  tokens: readonly number[],
  blockSize: number,
  sessionId: string | null = null,
): BlockStored {
  return {
    type: "BlockStored",
    blockHashes: hashes,
    parentBlockHash: parent,
    tokenIds: [...tokens],
    blockSize,
    loraId: null,
    medium: "GPU",
    loraName: null,
    extraKeys: null,
    groupIdx: 0,
    kvCacheSpecKind: "full_attention",
    kvCacheSpecSlidingWindow: null,
    sessionId,
  };
}
