// Memory of the sticky-binding table: bytes per binding at 1,000,000 bindings of 36-character session ids.
//
// Run: node --expose-gc --import tsx bench/affinity/memory.ts [--bindings 1000000] [--backends 16]
// Reports the growth of heapUsed and of arrayBuffers (typed arrays large enough live outside the V8 heap,
// so heapUsed alone would miss them) after full GCs, in three states:
//   fresh:      the table filled once (sessions arrive, nothing leaves yet)
//   churned:    then as many more new sessions, each evicting the least recently used (the steady state of a
//               busy gateway at max_bindings; expiry reclaim churns the same way)
//   keys apart: the same fill, with the session id strings allocated before the baseline and kept alive (the
//               table keeps no id strings of its own, so this should equal "fresh")
import { parseArgs } from "node:util";
import { StickyTable } from "../../src/affinity/sticky-table.js";
import { hashSession } from "../../src/affinity/rendezvous.js";
import { BENCH_HASH_KEY, gc, machine, newSessionId } from "./common.js";

const { values: args } = parseArgs({
  options: {
    bindings: { type: "string", default: "1000000" },
    backends: { type: "string", default: "16" },
  },
});
const BINDINGS = Number(args.bindings);
const BACKENDS = Array.from({ length: Number(args.backends) }, (_, i) => `small-${i}`);
const TTL_MS = 1_800_000;

interface Footprint {
  heapUsed: number;
  arrayBuffers: number;
}

function footprint(): Footprint {
  gc();
  const usage = process.memoryUsage();
  return { heapUsed: usage.heapUsed, arrayBuffers: usage.arrayBuffers };
}

function fill(table: StickyTable, ids: () => string, count: number, startMs: number): void {
  for (let i = 0; i < count; i++) {
    const id = ids();
    table.bind(id, hashSession(id), BACKENDS[i % BACKENDS.length]!, startMs + i + TTL_MS, startMs + i);
  }
}

function report(label: string, before: Footprint, after: Footprint): void {
  const heap = after.heapUsed - before.heapUsed;
  const buffers = after.arrayBuffers - before.arrayBuffers;
  const total = heap + buffers;
  console.log(
    `${label.padEnd(11)} heapUsed +${(heap / 1e6).toFixed(1)} MB, arrayBuffers +${(buffers / 1e6).toFixed(1)} MB, ` +
      `total ${(total / 1e6).toFixed(1)} MB = ${(total / BINDINGS).toFixed(1)} bytes per binding`,
  );
}

console.log(`# StickyTable memory, ${BINDINGS} bindings over ${BACKENDS.length} backends; ${machine()}`);

// Fresh fill: the id strings are garbage once hashed, so whatever stays is the table's own.
{
  const before = footprint();
  const table = new StickyTable(BINDINGS, BENCH_HASH_KEY);
  fill(table, newSessionId, BINDINGS, 0);
  const fresh = footprint();
  report("fresh", before, fresh);
  fill(table, newSessionId, BINDINGS, BINDINGS);
  if (table.size !== BINDINGS || table.evictions !== BINDINGS) throw new Error("unexpected table state");
  report("churned", before, footprint());
}

// The same with the strings made before the baseline and kept alive: a check that the table holds none.
{
  const keys = Array.from({ length: BINDINGS }, newSessionId);
  const before = footprint();
  const table = new StickyTable(BINDINGS, BENCH_HASH_KEY);
  let next = 0;
  fill(table, () => keys[next++]!, BINDINGS, 0);
  report("keys apart", before, footprint());
  if (table.size !== keys.length) throw new Error("unexpected table state");
}
