// llm-d's (the Gateway API Inference Extension's) approximate prefix-cache index: chained block hashes, an LRU per backend.
import { hashString } from "../hash.js";

export interface BlockHashSettings {
  /** Characters per block (the extension's default: vLLM's 16-token block x ~4 characters per token). */
  blockChars: number;
  /** Blocks hashed at most; a longer prompt is cut to this many blocks. */
  maxBlocks: number;
}

/**
 * The prompt's block hashes: hash 0 is seeded by the model (different models share no cache), then block i
 * hashes its characters together with hash i-1, so equal hashes mean equal prefixes. A trailing partial
 * block is ignored, and a prompt shorter than one block has no hashes.
 */
export function blockHashes(model: string, prompt: string, settings: BlockHashSettings): string[] {
  const usable = Math.min(prompt.length, settings.blockChars * settings.maxBlocks);
  const hashes: string[] = [];
  const seed = hashString(model);
  let previous = `${seed.hi.toString(16)}.${seed.lo.toString(16)}`;
  for (let start = 0; start + settings.blockChars <= usable; start += settings.blockChars) {
    // The separator is a code unit no prompt character is compared against: the previous hash is hex.
    const h = hashString(prompt.slice(start, start + settings.blockChars) + "\u0000" + previous);
    previous = `${h.hi.toString(16)}.${h.lo.toString(16)}`;
    hashes.push(previous);
  }
  return hashes;
}

/**
 * Which backends are believed to hold which blocks: each backend keeps its last `capacityPerBackend`
 * block hashes (least recently added evicted first), as the extension's indexer does.
 */
export class BlockIndex {
  private readonly byBackend = new Map<string, Map<string, true>>();
  private readonly byHash = new Map<string, Set<string>>();

  constructor(private readonly capacityPerBackend: number) {}

  /** Records that `backend` was sent a prompt with these block hashes. */
  add(hashes: readonly string[], backend: string): void {
    let lru = this.byBackend.get(backend);
    if (lru === undefined) {
      lru = new Map();
      this.byBackend.set(backend, lru);
    }
    for (const hash of hashes) {
      lru.delete(hash);
      lru.set(hash, true);
      let holders = this.byHash.get(hash);
      if (holders === undefined) {
        holders = new Set();
        this.byHash.set(hash, holders);
      }
      holders.add(backend);
      if (lru.size > this.capacityPerBackend) {
        const oldest = lru.keys().next().value as string;
        lru.delete(oldest);
        const oldHolders = this.byHash.get(oldest);
        oldHolders?.delete(backend);
        if (oldHolders?.size === 0) this.byHash.delete(oldest);
      }
    }
  }

  /** For each backend, how many leading blocks of `hashes` it holds (the walk stops at the first block nobody holds). */
  longestPrefix(hashes: readonly string[]): Map<string, number> {
    const matched = new Map<string, number>();
    for (const hash of hashes) {
      const holders = this.byHash.get(hash);
      if (holders === undefined || holders.size === 0) break;
      for (const backend of holders) matched.set(backend, (matched.get(backend) ?? 0) + 1);
    }
    return matched;
  }

  /** Forgets a backend that left the tier. */
  removeBackend(backend: string): void {
    const lru = this.byBackend.get(backend);
    if (lru === undefined) return;
    for (const hash of lru.keys()) {
      const holders = this.byHash.get(hash);
      holders?.delete(backend);
      if (holders?.size === 0) this.byHash.delete(hash);
    }
    this.byBackend.delete(backend);
  }

  backends(): string[] {
    return [...this.byBackend.keys()];
  }
}
