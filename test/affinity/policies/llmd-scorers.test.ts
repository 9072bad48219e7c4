// llm-d's scorer mix: block hashing, the per-backend LRU index, each scorer's value and the 3:2:2 sum.
import { describe, expect, it } from "vitest";
import { SeededRandom } from "../../../src/core/random.js";
import { BlockIndex, blockHashes } from "../../../src/affinity/policies/block-index.js";
import { LLMD_DEFAULTS, LlmdScorersPolicy } from "../../../src/affinity/policies/llmd-scorers.js";
import { candidate, reading } from "./candidates.js";

const BLOCKS = { blockChars: 64, maxBlocks: 256 };
const NONE: ReadonlySet<string> = new Set();
const req = (promptBytes: string) => ({ tier: "small", text: promptBytes, promptBytes, exclude: NONE });
const settings = { ...LLMD_DEFAULTS, engineSignalMaxAgeMs: Infinity };

describe("blockHashes", () => {
  it("hashes whole 64-character blocks, chained, seeded by the model", () => {
    expect(blockHashes("m", "a".repeat(63), BLOCKS)).toEqual([]);
    const first = blockHashes("m", "a".repeat(64) + "b".repeat(64) + "c".repeat(10), BLOCKS);
    expect(first).toHaveLength(2); // the trailing 10 characters are no block
    // Same first block, different second: the first hash agrees, the second not.
    const second = blockHashes("m", "a".repeat(64) + "x".repeat(64), BLOCKS);
    expect(second[0]).toBe(first[0]);
    expect(second[1]).not.toBe(first[1]);
    // Same second block after a different first: chaining makes the second hash differ too.
    const third = blockHashes("m", "z".repeat(64) + "b".repeat(64), BLOCKS);
    expect(third[1]).not.toBe(first[1]);
    expect(blockHashes("other-model", "a".repeat(64), BLOCKS)[0]).not.toBe(first[0]);
    expect(blockHashes("m", "a".repeat(64 * 300), BLOCKS)).toHaveLength(256);
  });
});

describe("BlockIndex", () => {
  it("counts leading blocks per backend and stops at the first block nobody holds", () => {
    const index = new BlockIndex(10);
    index.add(["h1", "h2", "h3"], "e0");
    index.add(["h1"], "e1");
    expect(index.longestPrefix(["h1", "h2", "h4", "h3"])).toEqual(
      new Map([
        ["e0", 2],
        ["e1", 1],
      ]),
    );
    expect(index.longestPrefix(["h9", "h1"])).toEqual(new Map());
  });

  it("keeps each backend's most recent blocks only", () => {
    const index = new BlockIndex(2);
    index.add(["h1", "h2", "h3"], "e0");
    expect(index.longestPrefix(["h1"])).toEqual(new Map());
    expect(index.longestPrefix(["h2", "h3"])).toEqual(new Map([["e0", 2]]));
  });
});

describe("LlmdScorersPolicy", () => {
  it("has llm-d's default weights", () => {
    expect(LLMD_DEFAULTS).toMatchObject({ prefixCacheWeight: 3, queueWeight: 2, kvCacheWeight: 2 });
  });

  it("sums 3 x prefix + 2 x queue + 2 x (1 - KV usage) and takes the highest", () => {
    const policy = new LlmdScorersPolicy(settings, new SeededRandom(1));
    const prompt = "p".repeat(64 * 4);
    const half = "p".repeat(64 * 2);
    // Teach the index that e0 holds the first 2 of the prompt's 4 blocks.
    policy.index("small").add(blockHashes("small", half, BLOCKS), "e0");
    // e0: 3 x 0.5 + 2 x 0 (the longer queue) + 2 x 0.5 = 2.5; e1: 0 + 2 x 1 + 2 x 0.1 = 2.2.
    const a = [
      candidate("e0", { queued: 2, engineLoad: reading({ kvCacheUsage: 0.5 }) }),
      candidate("e1", { engineLoad: reading({ kvCacheUsage: 0.9 }) }),
    ];
    expect(policy.select(req(prompt), a, 0)).toMatchObject({ backend: { id: "e0" }, reason: "max_score" });
    // e1 with more free KV: 2 + 2 x 0.4 = 2.8 beats e0's 2.5 (the index learnt the whole prompt on e0, so
    // use a fresh policy with the same 2 blocks on e0).
    const fresh = new LlmdScorersPolicy(settings, new SeededRandom(1));
    fresh.index("small").add(blockHashes("small", half, BLOCKS), "e0");
    const b = [a[0]!, candidate("e1", { engineLoad: reading({ kvCacheUsage: 0.6 }) })];
    expect(fresh.select(req(prompt), b, 0)?.backend.id).toBe("e1");
  });

  it("counts the engine's own waiting requests in the queue, and ignores stale readings", () => {
    const policy = new LlmdScorersPolicy({ ...settings, engineSignalMaxAgeMs: 100 }, new SeededRandom(1));
    const busy = [
      candidate("e0", { engineLoad: reading({ waitingRequests: 5, readAtMs: 1000 }) }),
      candidate("e1", { engineLoad: reading({ waitingRequests: 0, kvCacheUsage: 0.2, readAtMs: 1000 }) }),
    ];
    expect(policy.select(req("short"), busy, 1050)?.backend.id).toBe("e1");
    // At 2000 both readings are stale: both score neutral, so the tie is broken at random (both appear).
    const seen = new Set<string>();
    for (let i = 0; i < 50; i++) seen.add(policy.select(req("short"), busy, 2000)!.backend.id);
    expect(seen).toEqual(new Set(["e0", "e1"]));
  });

  it("records the chosen backend's blocks, so the same prompt then scores 1 there", () => {
    const policy = new LlmdScorersPolicy(settings, new SeededRandom(7));
    const idle = [candidate("e0"), candidate("e1"), candidate("e2")];
    const prompt = "q".repeat(640);
    const first = policy.select(req(prompt), idle, 0)!.backend.id;
    for (let i = 1; i < 10; i++) expect(policy.select(req(prompt), idle, i)!.backend.id).toBe(first);
    expect(
      policy
        .index("small")
        .longestPrefix(blockHashes("small", prompt, BLOCKS))
        .get(first),
    ).toBe(10);
  });
});
