// A fast 64-bit string hash (two 32-bit lanes, no BigInt) and the per-backend mix used by rendezvous scoring.
//
// The lane design follows cyrb53 (public domain, by bryc): each UTF-16 code unit is folded into two lanes
// with different odd multipliers, then the lanes are cross-mixed. Here both lanes are kept (64 bits, not 53)
// and a second absorb-then-finalize step lets the session be hashed once and combined with each backend.

/** The two 32-bit halves of a 64-bit hash state. */
export interface Hash64 {
  readonly hi: number;
  readonly lo: number;
}

const SEED_HI = 0x9e3779b9;
const SEED_LO = 0x85ebca6b;

/**
 * Absorbs a string into fresh lanes, then a separator word that no UTF-16 code unit can equal (it is wider
 * than 16 bits), so what follows (a backend's hash) can never be mistaken for more session characters.
 */
export function hashString(text: string): Hash64 {
  let hi = SEED_HI ^ text.length;
  let lo = SEED_LO ^ Math.imul(text.length, 0x27d4eb2f);
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    hi = Math.imul(hi ^ unit, 0x9e3779b1);
    lo = Math.imul(lo ^ unit, 0x5f356495);
  }
  hi = Math.imul(hi ^ 0xffff0000, 0x9e3779b1);
  lo = Math.imul(lo ^ 0x0000ffff, 0x5f356495);
  return finalize(hi, lo);
}

/** Both lanes avalanche into each other: every input bit affects every output bit (inlined in pairUniform). */
export function finalize(hi0: number, lo0: number): Hash64 {
  let hi = hi0;
  let lo = lo0;
  hi = Math.imul(hi ^ (hi >>> 16), 0x85ebca6b);
  hi ^= Math.imul(lo ^ (lo >>> 13), 0xc2b2ae35);
  lo = Math.imul(lo ^ (lo >>> 16), 0x85ebca6b);
  lo ^= Math.imul(hi ^ (hi >>> 13), 0xc2b2ae35);
  hi = Math.imul(hi ^ (hi >>> 15), 0x2c1b3c6d);
  lo = Math.imul(lo ^ (lo >>> 15), 0x297a2d39);
  hi ^= lo >>> 7;
  lo ^= hi >>> 11;
  return { hi: hi >>> 0, lo: lo >>> 0 };
}

const TWO_POW_32 = 4294967296;
const TWO_POW_53 = 9007199254740992;

/**
 * The rendezvous draw for one (session, backend) pair, as a uniform number strictly inside (0, 1):
 * the session's hash state absorbs the backend's hash (two words), then is finalized again.
 */
export function pairUniform(session: Hash64, backend: Hash64): number {
  let hi = Math.imul(session.hi ^ backend.hi, 0x9e3779b1);
  let lo = Math.imul(session.lo ^ backend.lo, 0x5f356495);
  hi = Math.imul(hi ^ backend.lo, 0x9e3779b1);
  lo = Math.imul(lo ^ backend.hi, 0x5f356495);
  // finalize(), inlined: this runs once per candidate on every miss, so it must not allocate.
  hi = Math.imul(hi ^ (hi >>> 16), 0x85ebca6b);
  hi ^= Math.imul(lo ^ (lo >>> 13), 0xc2b2ae35);
  lo = Math.imul(lo ^ (lo >>> 16), 0x85ebca6b);
  lo ^= Math.imul(hi ^ (hi >>> 13), 0xc2b2ae35);
  hi = Math.imul(hi ^ (hi >>> 15), 0x2c1b3c6d);
  lo = Math.imul(lo ^ (lo >>> 15), 0x297a2d39);
  hi ^= lo >>> 7;
  lo ^= hi >>> 11;
  // 53 well-mixed bits -> (0, 1); the +0.5 keeps 0 and 1 out, so ln(u) is finite and negative.
  return ((hi >>> 11) * TWO_POW_32 + (lo >>> 0) + 0.5) / TWO_POW_53;
}
