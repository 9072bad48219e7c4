// vLLM's block hashes: digests equal to CPython's (vectors made with CPython 3.11 pickle/hashlib and Debian's cbor2 5.4).
import { describe, expect, it } from "vitest";
import { externalBlockHash, VllmBlockHasher } from "../../src/sim/vllm-block-hash.js";

const CHATML_BLOCK = [
  151644, 872, 198, 9064, 374, 279, 6722, 315, 5616, 30, 151645, 198, 151644, 77091, 198, 151667,
];
const RANGE_16 = Array.from({ length: 16 }, (_, i) => i);

/** `python3 -c 'hashlib.sha256(pickle.dumps(t, protocol=5)).digest().hex()'` (or cbor2.dumps(t, canonical=True)). */
const VECTORS = {
  sha256: {
    noneHashSeed0: "1973e23848344dc43a988a9b478663803cfffe1243480253f9a3cf004b14aa7c",
    first: "933e6a56fd330ed68cf152050850f0418ae4dcd07245b079344e6cd4b3a32cd4",
    second: "22458651a97e77ffeddd7710013c10d4bd8896b728af134a5f0517bae6b50312",
    salted: "17c83d5ddd5b1aaa94b8f8d0671262e45fb51db8fa42601ddfca88b4fc09c5cc",
    short: "c128b7907a1dcdcf1af44a0bf6a19917e5cdc31c640fd057aa2e1f1b3a8b3ac3",
  },
  sha256_cbor: {
    noneHashSeed0: "4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e",
    first: "01d05b6f65e01869495b2fea10fc39faaf80fd6592bda930d20799bf0f09a40d",
    second: "2da9166fa107a10ef652a43e0b242c488b0e44f29c514e1dbf915655d37882fe",
    salted: "c7bd9a2d29eb83df1ce4f8ba9b5ef1b1d1f815af16a5766ab21e000a3c1914ed",
    short: "a4d2c1b4e93a03eb50e0b865783b206c617b3b1479fb8a0aa6a9c4e888af6d5f",
  },
} as const;

describe("VllmBlockHasher", () => {
  for (const algo of ["sha256", "sha256_cbor"] as const) {
    describe(algo, () => {
      const hasher = new VllmBlockHasher({ algo, pythonHashSeed: "0" });
      const expected = VECTORS[algo];

      it("derives NONE_HASH from PYTHONHASHSEED as vLLM's init_none_hash", () => {
        expect(hasher.noneHash.toString("hex")).toBe(expected.noneHashSeed0);
      });

      it("chains blocks: hash(parent or NONE_HASH, tuple(tokens), extra_keys)", () => {
        const first = hasher.hashBlock(undefined, CHATML_BLOCK, 0, 16);
        expect(first.toString("hex")).toBe(expected.first);
        const both = [...CHATML_BLOCK, ...RANGE_16];
        expect(hasher.hashBlock(first, both, 16, 16).toString("hex")).toBe(expected.second);
      });

      it("mixes the extra keys (a cache_salt on the first block) and short tuples", () => {
        expect(hasher.hashBlock(undefined, CHATML_BLOCK, 0, 16, ["tenant-a"]).toString("hex")).toBe(
          expected.salted,
        );
        expect(hasher.hashBlock(undefined, [1, 2], 0, 2).toString("hex")).toBe(expected.short);
      });
    });
  }

  it("writes long strings with BINUNICODE and seeds other than 0", () => {
    const hasher = new VllmBlockHasher({ algo: "sha256", pythonHashSeed: "abc" });
    expect(hasher.noneHash.toString("hex")).toBe(
      "2cfc748e5e937981d23ad516dda8e8eea7f26e0d703e6c77a7acf35929cab2dc",
    );
    const seeded = new VllmBlockHasher({ algo: "sha256", pythonHashSeed: "0" });
    expect(seeded.hashBlock(undefined, [1, 2], 0, 2, ["x".repeat(300)]).toString("hex")).toBe(
      "d538ef169fb29d83c292edda557243abd462719b9c67d397bd168ffdbc80de31",
    );
  });

  it("draws NONE_HASH from the random source when no seed is set", () => {
    const hasher = new VllmBlockHasher({ algo: "sha256", randomSource: (n) => Buffer.alloc(n, 7) });
    expect(hasher.noneHash).toEqual(Buffer.alloc(32, 7));
  });

  it("puts the digest's low 64 bits, big-endian, on the wire", () => {
    const digest = Buffer.from(VECTORS.sha256.first, "hex");
    // int.from_bytes(digest, "big") & ((1 << 64) - 1) in CPython
    expect(externalBlockHash(digest)).toBe(3769069598958365908n);
  });
});
