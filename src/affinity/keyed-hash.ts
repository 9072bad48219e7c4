// A keyed 64-bit string hash (HalfSipHash) for the sticky table's index: session ids are chosen by clients,
// so the table must hash them with a secret key, or a client could craft ids that all land in one probe run.
//
// HalfSipHash is Aumasson's 32-bit-word variant of SipHash (github.com/veorq/SipHash); 32-bit words suit
// JavaScript's integer arithmetic. With 1 compression and 3 finalization rounds it is what the Linux kernel
// uses to key its hash tables against flooding (hsiphash). The sticky table never exposes these values.

/** Rounds per input word and at finalization: 1-3 keys hash tables; 2-4 is the reference's (for its vectors). */
export interface SipRounds {
  readonly compression: number;
  readonly finalization: number;
}

export const HASH_TABLE_ROUNDS: SipRounds = { compression: 1, finalization: 3 };

/**
 * Hashes strings into `hi`/`lo`, as signed 32-bit integers (read them right after `hash()`: no object per
 * call on the request path).
 * A string whose code units all fit in a byte is hashed as those bytes, exactly as the reference hashes a
 * byte string (session ids are ASCII, so 4 characters per word); any other string as its UTF-16LE bytes under
 * a second key derived from the first, so the two encodings cannot collide by construction.
 */
export class KeyedHasher {
  hi = 0;
  lo = 0;
  private v0 = 0;
  private v1 = 0;
  private v2 = 0;
  private v3 = 0;
  private readonly compressionRounds: number;
  private readonly finalizationRounds: number;

  /** `key`: two 32-bit words of secret randomness (the reference's 8-byte key, little-endian). */
  constructor(
    private readonly key: readonly [number, number],
    rounds: SipRounds = HASH_TABLE_ROUNDS,
  ) {
    this.compressionRounds = rounds.compression;
    this.finalizationRounds = rounds.finalization;
  }

  hash(text: string): void {
    if (!this.hashBytes(text)) this.hashUtf16(text);
  }

  /** The byte path; false (and nothing written) if a code unit does not fit in a byte. */
  private hashBytes(text: string): boolean {
    const length = text.length;
    this.start(this.key[0], this.key[1]);
    const whole = length & ~3;
    for (let i = 0; i < whole; i += 4) {
      const b0 = text.charCodeAt(i);
      const b1 = text.charCodeAt(i + 1);
      const b2 = text.charCodeAt(i + 2);
      const b3 = text.charCodeAt(i + 3);
      if ((b0 | b1 | b2 | b3) > 0xff) return false;
      this.absorb(b0 | (b1 << 8) | (b2 << 16) | (b3 << 24));
    }
    let last = length << 24;
    for (let i = whole, shift = 0; i < length; i++, shift += 8) {
      const unit = text.charCodeAt(i);
      if (unit > 0xff) return false;
      last |= unit << shift;
    }
    this.finish(last);
    return true;
  }

  private hashUtf16(text: string): void {
    const length = text.length;
    // Any fixed change of key gives an unrelated function; these constants are the fractional digits of phi.
    this.start(this.key[0] ^ 0x9e3779b9, this.key[1] ^ 0x7f4a7c15);
    const whole = length & ~1;
    for (let i = 0; i < whole; i += 2) this.absorb(text.charCodeAt(i) | (text.charCodeAt(i + 1) << 16));
    const bytes = length * 2;
    this.finish((bytes << 24) | (length & 1 ? text.charCodeAt(length - 1) : 0));
  }

  private start(k0: number, k1: number): void {
    this.v0 = k0;
    this.v1 = k1 ^ 0xee; // 0xee: the reference's marker for a 64-bit tag
    this.v2 = k0 ^ 0x6c796765;
    this.v3 = k1 ^ 0x74656462;
  }

  private absorb(word: number): void {
    this.v3 ^= word;
    for (let r = 0; r < this.compressionRounds; r++) this.round();
    this.v0 ^= word;
  }

  /** `last`: the input's length mod 256 in the top byte, its 0-3 leftover bytes below. */
  private finish(last: number): void {
    this.absorb(last);
    this.v2 ^= 0xee;
    for (let r = 0; r < this.finalizationRounds; r++) this.round();
    this.lo = this.v1 ^ this.v3;
    this.v1 ^= 0xdd;
    for (let r = 0; r < this.finalizationRounds; r++) this.round();
    this.hi = this.v1 ^ this.v3;
  }

  private round(): void {
    let v0 = this.v0;
    let v1 = this.v1;
    let v2 = this.v2;
    let v3 = this.v3;
    v0 = (v0 + v1) | 0;
    v1 = (v1 << 5) | (v1 >>> 27);
    v1 ^= v0;
    v0 = (v0 << 16) | (v0 >>> 16);
    v2 = (v2 + v3) | 0;
    v3 = (v3 << 8) | (v3 >>> 24);
    v3 ^= v2;
    v0 = (v0 + v3) | 0;
    v3 = (v3 << 7) | (v3 >>> 25);
    v3 ^= v0;
    v2 = (v2 + v1) | 0;
    v1 = (v1 << 13) | (v1 >>> 19);
    v1 ^= v2;
    v2 = (v2 << 16) | (v2 >>> 16);
    this.v0 = v0;
    this.v1 = v1;
    this.v2 = v2;
    this.v3 = v3;
  }
}
