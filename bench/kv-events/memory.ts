// Memory of the gateway's per-engine KV index (src/kv-events/engine-index.ts): bytes per block held, and the cost
// of applying BlockStored events, at 1,000,000 blocks.
//
// Run: node --expose-gc --import tsx bench/kv-events/memory.ts [--blocks 1000000] [--blocks-per-event 32]
// Events as a simulated engine publishes them for agent sessions: chains of `--blocks-per-event` 16-token blocks,
// each event continuing a session's chain, a session id on each. Reports heapUsed (plus ArrayBuffers) growth after full GCs, with the
// events themselves garbage (the index keeps no event), then with every block removed again.
import { parseArgs } from "node:util";
import { EngineIndex } from "../../src/kv-events/engine-index.js";
import type { BlockStored } from "../../src/kv-events/wire.js";
import { gc, machine } from "../affinity/common.js";
import { storedEvent } from "../../test/kv-events/stored-event.js";

const { values: args } = parseArgs({
  options: {
    blocks: { type: "string", default: "1000000" },
    "blocks-per-event": { type: "string", default: "32" },
    "blocks-per-session": { type: "string", default: "8192" },
  },
});
const BLOCKS = Number(args.blocks);
const PER_EVENT = Number(args["blocks-per-event"]);
const PER_SESSION = Number(args["blocks-per-session"]);
const BLOCK_SIZE = 16;

/** The JS heap plus ArrayBuffers' memory (typed arrays keep theirs outside the heap). */
function heapUsed(): number {
  gc();
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  return heapUsed + arrayBuffers;
}

/** The event storing blocks [first, first + PER_EVENT) of the stream; hashes are distinct 64-bit values. */
function event(first: number): BlockStored {
  const hashes: bigint[] = [];
  const tokens: number[] = [];
  for (let b = first; b < first + PER_EVENT; b++) {
    hashes.push((0x9e3779b97f4a7c15n * BigInt(b + 1)) & 0xffffffffffffffffn);
    for (let t = 0; t < BLOCK_SIZE; t++) tokens.push((b * 31 + t * 7) % 151_643);
  }
  const parent =
    first % PER_SESSION === 0 ? null : (0x9e3779b97f4a7c15n * BigInt(first)) & 0xffffffffffffffffn;
  return storedEvent(hashes, parent, tokens, BLOCK_SIZE, `session-${Math.floor(first / PER_SESSION)}`);
}

console.log(
  `# EngineIndex memory, ${BLOCKS} blocks of ${BLOCK_SIZE} tokens in events of ${PER_EVENT} blocks, ` +
    `${PER_SESSION} blocks per session; ${machine()}`,
);
const before = heapUsed();
const index = new EngineIndex(BLOCKS + 1);
let storeMs = 0;
for (let first = 0; first < BLOCKS; first += PER_EVENT) {
  const stored = event(first);
  const startedMs = performance.now();
  index.stored(stored);
  storeMs += performance.now() - startedMs;
}
const filled = heapUsed();
console.log(
  `filled:  ${index.size} blocks, heapUsed +${((filled - before) / 1e6).toFixed(1)} MB = ` +
    `${((filled - before) / index.size).toFixed(1)} bytes per block; applying the events took ` +
    `${(storeMs / 1000).toFixed(2)} s = ${((storeMs * 1e6) / BLOCKS).toFixed(0)} ns per block`,
);
let removeMs = 0;
for (let first = 0; first < BLOCKS; first += PER_EVENT) {
  const removed = {
    type: "BlockRemoved",
    blockHashes: event(first).blockHashes,
    medium: "GPU",
    groupIdx: 0,
  } as const;
  const startedMs = performance.now();
  index.removed(removed);
  removeMs += performance.now() - startedMs;
}
console.log(
  `removed: ${index.size} blocks left, heapUsed +${((heapUsed() - before) / 1e6).toFixed(1)} MB over the start ` +
    `(session chains stay until their sessions are dropped); removals took ` +
    `${((removeMs * 1e6) / BLOCKS).toFixed(0)} ns per block`,
);
