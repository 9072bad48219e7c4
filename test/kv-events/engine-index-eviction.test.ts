// What an engine will still hold when it schedules a request: the index's recency order (stores, ends of the
// requests that reused blocks) walked as the engine's free queue evicts, and the capacity learned from its events.
import { describe, expect, it } from "vitest";
import { EngineIndex } from "../../src/kv-events/engine-index.js";
import { promptBlocksOf } from "../../src/kv-events/prompt-blocks.js";
import type { BlockRemoved, BlockStored } from "../../src/kv-events/wire.js";
import { storedEvent } from "./stored-event.js";

function stored(hashes: bigint[], parent: bigint | null, tokens: readonly number[]): BlockStored {
  return storedEvent(hashes, parent, tokens, 4);
}

function removed(hashes: bigint[]): BlockRemoved {
  return { type: "BlockRemoved", blockHashes: hashes, medium: "GPU", groupIdx: 0 };
}

/** Two prompts of three blocks each (block size 4), and one more token so every block is reusable. */
const A = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13];
const B = [21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33];
const KEYS_A = promptBlocksOf(A, 4, undefined).keys;
const KEYS_B = promptBlocksOf(B, 4, undefined).keys;
const NOTHING_IN_USE = (): boolean => false;

function indexOfBoth(): EngineIndex {
  const index = new EngineIndex(100);
  index.stored(stored([1n, 2n, 3n], null, A.slice(0, 12)));
  index.stored(stored([11n, 12n, 13n], null, B.slice(0, 12)));
  return index;
}

describe("EngineIndex eviction forecast", () => {
  it("has spare blocks up to its max_blocks until the engine first evicts, then its peak less what it holds", () => {
    const index = indexOfBoth();
    expect(index.roomBlocks()).toBe(94); // max_blocks 100, 6 held: the engine may fill before it first evicts
    index.removed(removed([13n]));
    expect(index.roomBlocks()).toBe(1);
    index.stored(stored([13n], 12n, B.slice(8, 12)));
    expect(index.roomBlocks()).toBe(0);
  });

  it("tells which content it evicted, once its last copy is removed", () => {
    const evicted: number[] = [];
    const index = new EngineIndex(100, undefined, (key) => evicted.push(key));
    index.stored(stored([1n, 2n, 3n], null, A.slice(0, 12)));
    index.stored(stored([1n], null, A.slice(0, 4))); // a second copy of block 1
    index.removed(removed([1n, 3n]));
    expect(evicted).toEqual([KEYS_A[2]]);
    index.removed(removed([1n]));
    expect(evicted).toEqual([KEYS_A[2], KEYS_A[0]]);
  });

  it("has room for its max_blocks less what it holds until it first evicts, then for its peak less that", () => {
    const index = new EngineIndex(10);
    index.stored(stored([1n, 2n, 3n], null, A.slice(0, 12)));
    index.stored(stored([11n, 12n, 13n], null, B.slice(0, 12)));
    expect(index.roomBlocks()).toBe(4);
    index.removed(removed([13n, 12n]));
    expect(index.roomBlocks()).toBe(2); // peak 6 less 4 held: the engine's cache is 6 blocks, not 10
  });

  it("evicts the least recently stored first, and a prompt's run is cut where its first block goes", () => {
    const index = indexOfBoth();
    // A was stored first: two evictions take its first two blocks, so nothing of it is left as a leading run.
    expect(index.forecastRun(KEYS_A, 3, 2, NOTHING_IN_USE)).toBe(0);
    expect(index.forecastRun(KEYS_B, 3, 2, NOTHING_IN_USE)).toBe(3);
    expect(index.forecastRun(KEYS_B, 3, 4, NOTHING_IN_USE)).toBe(0);
    expect(index.forecastRun(KEYS_A, 3, 0, NOTHING_IN_USE)).toBe(3);
  });

  it("puts a finished request's blocks last, its tail before its prefix, as vLLM frees them", () => {
    const index = indexOfBoth();
    index.touch(KEYS_A, 3);
    // B is now the oldest; then A's tail block, then its middle one.
    expect(index.forecastRun(KEYS_B, 3, 3, NOTHING_IN_USE)).toBe(0);
    expect(index.forecastRun(KEYS_A, 3, 3, NOTHING_IN_USE)).toBe(3);
    expect(index.forecastRun(KEYS_A, 3, 4, NOTHING_IN_USE)).toBe(2);
    expect(index.forecastRun(KEYS_A, 3, 5, NOTHING_IN_USE)).toBe(1);
    expect(index.forecastRun(KEYS_A, 3, 6, NOTHING_IN_USE)).toBe(0);
  });

  it("never evicts a block in use: the evictions fall on the next oldest", () => {
    const index = indexOfBoth();
    const inUse = (key: number): boolean => Array.from(KEYS_A).includes(key);
    expect(index.forecastRun(KEYS_B, 3, 1, inUse)).toBe(0);
    expect(index.forecastRun(KEYS_A, 3, 6, inUse)).toBe(3);
  });

  it("forgets removed and cleared blocks", () => {
    const index = indexOfBoth();
    index.removed(removed([1n, 2n, 3n]));
    // A is gone from the order: the first evictions fall on B at once.
    expect(index.forecastRun(KEYS_B, 3, 1, NOTHING_IN_USE)).toBe(0);
    index.cleared();
    expect(index.forecastRun(KEYS_B, 3, 1, NOTHING_IN_USE)).toBe(3);
  });
});
