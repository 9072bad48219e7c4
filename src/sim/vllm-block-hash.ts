// vLLM's prefix-cache block hashes, byte for byte: what `--prefix-caching-hash-algo` selects in vLLM 0.26.
//
// vLLM (vllm/v1/core/kv_cache_utils.py, hash_block_tokens) hashes the Python tuple
// `(parent_hash or NONE_HASH, tuple(block_token_ids), extra_keys)` with the chosen function
// (vllm/utils/hashing.py): `sha256` = SHA-256 of `pickle.dumps(t, protocol=5)`, `sha256_cbor` = SHA-256 of
// `cbor2.dumps(t, canonical=True)`. Both serialisations are written here for exactly the values that tuple can
// hold (32-byte digests, non-negative token ids, None, short tuples of strings), so the digests equal CPython's
// (test vectors in test/sim/vllm-block-hash.test.ts were made with CPython 3.12's pickle and hashlib).
// `xxhash` and `xxhash_cbor` (xxh3-128 of the same bytes) need a native xxh3 binding and are not offered.
// NONE_HASH, the first block's parent, is the hash of the PYTHONHASHSEED string when one is given, else 32 random
// bytes per process, as in vLLM. On the KV-event wire a hash is the low 64 bits of the digest read big-endian
// (maybe_convert_block_hash with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1, vLLM's default).
import { createHash, randomBytes } from "node:crypto";
import { ByteWriter } from "../core/byte-writer.js";

export const PREFIX_CACHING_HASH_ALGOS = ["sha256", "sha256_cbor"] as const;
export type PrefixCachingHashAlgo = (typeof PREFIX_CACHING_HASH_ALGOS)[number];

/** vLLM's algorithms this simulator cannot compute (no xxh3-128 in Node without a native module). */
export const UNSUPPORTED_HASH_ALGOS = ["xxhash", "xxhash_cbor"] as const;

/** A block's extra keys (LoRA name, cache_salt, ...): vLLM's `extra_keys` tuple, or null when it has none. */
export type BlockExtraKeys = readonly string[] | null;

// Pickle opcodes (CPython Lib/pickle.py) used by protocol 5 for these values.
const PROTO = 0x80;
const FRAME = 0x95;
const MEMOIZE = 0x94;
const STOP = 0x2e;
const SHORT_BINBYTES = 0x43;
const SHORT_BINUNICODE = 0x8c;
const BINUNICODE = 0x58;
const BININT1 = 0x4b;
const BININT2 = 0x4d;
const BININT = 0x4a;
const NONE = 0x4e;
const MARK = 0x28;
const TUPLE = 0x74;
const EMPTY_TUPLE = 0x29;
const TUPLE_N = [EMPTY_TUPLE, 0x85, 0x86, 0x87] as const;

function pickleInt(out: ByteWriter, value: number): void {
  if (!Number.isInteger(value) || value < -0x80000000 || value > 0x7fffffff) {
    throw new RangeError(`token id ${value} is outside the range this pickler writes`);
  }
  if (value >= 0 && value < 0x100) {
    out.u8(BININT1);
    out.u8(value);
  } else if (value >= 0 && value < 0x10000) {
    out.u8(BININT2);
    out.u16(value);
  } else {
    out.u8(BININT);
    out.i32(value);
  }
}

function pickleString(out: ByteWriter, value: string): void {
  const utf8 = Buffer.from(value, "utf8");
  if (utf8.length < 0x100) {
    out.u8(SHORT_BINUNICODE);
    out.u8(utf8.length);
  } else {
    out.u8(BINUNICODE);
    out.u32(utf8.length);
  }
  out.append(utf8);
  out.u8(MEMOIZE);
}

/** Saves a tuple whose elements `writeItems` saves (CPython's save_tuple for protocol >= 2). */
function pickleTuple(out: ByteWriter, length: number, writeItems: () => void): void {
  if (length === 0) {
    out.u8(EMPTY_TUPLE);
    return;
  }
  if (length <= 3) {
    writeItems();
    out.u8(TUPLE_N[length] as number);
  } else {
    out.u8(MARK);
    writeItems();
    out.u8(TUPLE);
  }
  out.u8(MEMOIZE);
}

/** Protocol-5 framing around `writeBody`: PROTO 5, then one FRAME of everything up to and including STOP. */
function pickled(writeBody: (out: ByteWriter) => void): Buffer {
  const out = new ByteWriter();
  out.u8(PROTO);
  out.u8(5);
  out.u8(FRAME);
  const lengthAt = out.size;
  out.u64(0);
  writeBody(out);
  out.u8(STOP);
  const frameLength = out.size - lengthAt - 8;
  // CPython leaves frames shorter than 4 bytes unframed; a body here is never that short.
  out.u64At(lengthAt, frameLength);
  return out.bytes();
}

function pickleHashInput(
  parent: Uint8Array,
  tokens: ArrayLike<number>,
  start: number,
  count: number,
  extraKeys: BlockExtraKeys,
): Buffer {
  return pickled((out) => {
    pickleTuple(out, 3, () => {
      out.u8(SHORT_BINBYTES);
      out.u8(parent.length);
      out.append(parent);
      out.u8(MEMOIZE);
      pickleTuple(out, count, () => {
        for (let i = start; i < start + count; i++) pickleInt(out, tokens[i] as number);
      });
      if (extraKeys === null) out.u8(NONE);
      else pickleTuple(out, extraKeys.length, () => extraKeys.forEach((key) => pickleString(out, key)));
    });
  });
}

/** A CBOR head: major type and argument in the shortest form (canonical encoding). */
function cborHead(out: ByteWriter, major: number, value: number): void {
  const type = major << 5;
  if (value < 24) out.u8(type | value);
  else if (value < 0x100) {
    out.u8(type | 24);
    out.u8(value);
  } else if (value < 0x10000) {
    out.u8(type | 25);
    out.u8(value >>> 8);
    out.u8(value & 0xff);
  } else if (value < 0x100000000) {
    out.u8(type | 26);
    out.u32be(value);
  } else {
    throw new RangeError(`CBOR argument ${value} is outside the range this encoder writes`);
  }
}

function cborHashInput(
  parent: Uint8Array,
  tokens: ArrayLike<number>,
  start: number,
  count: number,
  extraKeys: BlockExtraKeys,
): Buffer {
  const out = new ByteWriter();
  cborHead(out, 4, 3);
  cborHead(out, 2, parent.length);
  out.append(parent);
  cborHead(out, 4, count);
  for (let i = start; i < start + count; i++) {
    const token = tokens[i] as number;
    if (!Number.isInteger(token) || token < 0) throw new RangeError(`token id ${token} is not a CBOR uint`);
    cborHead(out, 0, token);
  }
  if (extraKeys === null) out.u8(0xf6);
  else {
    cborHead(out, 4, extraKeys.length);
    for (const key of extraKeys) {
      const utf8 = Buffer.from(key, "utf8");
      cborHead(out, 3, utf8.length);
      out.append(utf8);
    }
  }
  return out.bytes();
}

function sha256(data: Uint8Array): Buffer {
  return createHash("sha256").update(data).digest();
}

/** vLLM's hash function applied to a Python str (how NONE_HASH is derived from PYTHONHASHSEED). */
function hashString(algo: PrefixCachingHashAlgo, value: string): Buffer {
  if (algo === "sha256") return sha256(pickled((out) => pickleString(out, value)));
  const out = new ByteWriter();
  const utf8 = Buffer.from(value, "utf8");
  cborHead(out, 3, utf8.length);
  out.append(utf8);
  return sha256(out.bytes());
}

export interface VllmBlockHasherOptions {
  algo: PrefixCachingHashAlgo;
  /** vLLM reads PYTHONHASHSEED; undefined: NONE_HASH is random per process (`randomSource`). */
  pythonHashSeed?: string | undefined;
  /** Source of the 32 random bytes when there is no seed (injected by tests). */
  randomSource?: (bytes: number) => Buffer;
}

/** Computes one engine's block hashes (its NONE_HASH fixed at construction, as vLLM's init_none_hash). */
export class VllmBlockHasher {
  readonly algo: PrefixCachingHashAlgo;
  readonly noneHash: Buffer;

  constructor(options: VllmBlockHasherOptions) {
    this.algo = options.algo;
    const seed = options.pythonHashSeed;
    this.noneHash =
      seed === undefined ? (options.randomSource ?? randomBytes)(32) : hashString(options.algo, seed);
  }

  /** The digest of tokens[start, start + count) after the block whose digest is `parent` (undefined: first). */
  hashBlock(
    parent: Uint8Array | undefined,
    tokens: ArrayLike<number>,
    start: number,
    count: number,
    extraKeys: BlockExtraKeys = null,
  ): Buffer {
    const serialize = this.algo === "sha256" ? pickleHashInput : cborHashInput;
    return sha256(serialize(parent ?? this.noneHash, tokens, start, count, extraKeys));
  }
}

/** A digest as the KV-event wire carries it: the low 64 bits, big-endian. */
export function externalBlockHash(digest: Uint8Array): bigint {
  return Buffer.from(digest.buffer, digest.byteOffset, digest.length).readBigUInt64BE(digest.length - 8);
}
