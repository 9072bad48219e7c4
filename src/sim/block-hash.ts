// Content keys of full KV blocks: a hash of the parent block's key and the block's token ids, as vLLM chains them.
//
// Two independent 32-bit murmur3-style lanes are folded into one 53-bit integer, so keys are plain numbers (fast
// Map keys) and a collision between different prefixes is about 2^-53 per pair: negligible for a simulator.

/** The parent key of a sequence's first block when the request has no cache salt. */
export const ROOT_BLOCK_HASH = 0;

const TWO_POW_32 = 4294967296;
const TWO_POW_21 = 2097152;

function rotl(x: number, r: number): number {
  return (x << r) | (x >>> (32 - r));
}

function fmix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

function mixLane(h: number, k: number, c1: number, c2: number): number {
  k = Math.imul(k, c1);
  k = rotl(k, 15);
  k = Math.imul(k, c2);
  h ^= k;
  h = rotl(h, 13);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

function fold(h1: number, h2: number): number {
  return fmix(h1) * TWO_POW_21 + (fmix(h2) >>> 11);
}

/** The key of the block holding tokens[start, start + count) whose previous block has key `parentHash`. */
export function hashBlock(
  parentHash: number,
  tokens: ArrayLike<number>,
  start: number,
  count: number,
): number {
  const parentLow = parentHash >>> 0;
  const parentHigh = Math.floor(parentHash / TWO_POW_32) >>> 0;
  let h1 = mixLane(0x3c6ef372, parentLow, 0xcc9e2d51, 0x1b873593);
  h1 = mixLane(h1, parentHigh, 0xcc9e2d51, 0x1b873593);
  let h2 = mixLane(0x510e527f, parentHigh, 0x85ebca77, 0xc2b2ae3d);
  h2 = mixLane(h2, parentLow, 0x85ebca77, 0xc2b2ae3d);
  const end = start + count;
  for (let i = start; i < end; i++) {
    const token = tokens[i] as number;
    h1 = mixLane(h1, token, 0xcc9e2d51, 0x1b873593);
    h2 = mixLane(h2, token ^ 0x5bd1e995, 0x85ebca77, 0xc2b2ae3d);
  }
  h1 ^= count;
  h2 ^= count;
  return fold(h1, h2);
}

/** A root key derived from vLLM's `cache_salt`, so salted requests share blocks only with the same salt. */
export function saltRootHash(salt: string): number {
  let h1 = 0x6a09e667;
  let h2 = 0xbb67ae85;
  for (let i = 0; i < salt.length; i++) {
    const c = salt.charCodeAt(i);
    h1 = mixLane(h1, c, 0xcc9e2d51, 0x1b873593);
    h2 = mixLane(h2, c ^ 0x27d4eb2f, 0x85ebca77, 0xc2b2ae3d);
  }
  h1 ^= salt.length;
  h2 ^= salt.length;
  // Never the unsalted root, so a salt cannot alias the shared prefix space.
  return fold(h1, h2) || 1;
}
