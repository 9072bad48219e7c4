// Where placement's time goes: the cost of each piece on its own, to read the select.ts numbers against.
//
// Run: node --expose-gc --import tsx bench/affinity/breakdown.ts
import { createBalancer } from "../../src/affinity/balancers.js";
import { hashString, pairUniform } from "../../src/affinity/hash.js";
import { hashSession, rendezvousWinner } from "../../src/affinity/rendezvous.js";
import { MemoryBindingStore } from "../../src/affinity/memory-bindings.js";
import { PlacementService } from "../../src/affinity/placement-service.js";
import { KeyedHasher } from "../../src/affinity/keyed-hash.js";
import { StickyTable } from "../../src/affinity/sticky-table.js";
import { ManualClock, systemClock } from "../../src/core/clock.js";
import { SeededRandom } from "../../src/core/random.js";
import { GatewayMetrics } from "../../src/metrics/gateway-metrics.js";
import { BENCH_HASH_KEY, engines, freshCopy, gc, machine, median, newSessionId } from "./common.js";

const CALLS = 1 << 20;
let sink = 0;

/** Median over 7 runs (after 2 warm-up runs) of ns per iteration of `body`, which must do `CALLS` iterations. */
async function time(
  label: string,
  body: () => number | Promise<number>,
  perIteration = CALLS,
): Promise<void> {
  const results: number[] = [];
  for (let run = 0; run < 9; run++) {
    gc();
    const start = process.hrtime.bigint();
    sink += await body();
    const ns = Number(process.hrtime.bigint() - start) / perIteration;
    if (run >= 2) results.push(ns);
  }
  console.log(`| ${label} | ${median(results).toFixed(1)} |`);
}

console.log(`# ${machine()}\n`);
console.log("| piece | ns |");
console.log("| --- | ---: |");

await time("systemClock.nowMs() (performance.timeOrigin + performance.now())", () => {
  let x = 0;
  for (let i = 0; i < CALLS; i++) x += systemClock.nowMs();
  return x;
});
const origin = performance.timeOrigin;
await time("origin cached + performance.now()", () => {
  let x = 0;
  for (let i = 0; i < CALLS; i++) x += origin + performance.now();
  return x;
});

const ids = Array.from({ length: 1024 }, newSessionId);
await time("hashString, 36-character id", () => {
  let x = 0;
  for (let i = 0; i < CALLS; i++) x += hashString(ids[i & 1023]!).lo;
  return x;
});
const keyed = new KeyedHasher(BENCH_HASH_KEY);
await time("KeyedHasher.hash (HalfSipHash-1-3), 36-character id", () => {
  let x = 0;
  for (let i = 0; i < CALLS; i++) {
    keyed.hash(ids[i & 1023]!);
    x += keyed.lo;
  }
  return x;
});
const sessions = ids.map(hashSession);
const list16 = engines(16);
await time("pairUniform (one candidate)", () => {
  let x = 0;
  for (let i = 0; i < CALLS; i++) x += pairUniform(sessions[i & 1023]!, list16[i & 15]!.idHash);
  return x;
});
await time("Math.log(pairUniform) (one candidate)", () => {
  let x = 0;
  for (let i = 0; i < CALLS; i++) x += Math.log(pairUniform(sessions[i & 1023]!, list16[i & 15]!.idHash));
  return x;
});
for (const n of [4, 16, 64]) {
  const list = engines(n);
  const calls = CALLS / n;
  await time(
    `rendezvousWinner over ${n} engines (eligible: state up)`,
    () => {
      let x = 0;
      for (let i = 0; i < calls; i++)
        x += rendezvousWinner(sessions[i & 1023]!, list, (c) => c.state === "up")!.weight;
      return x;
    },
    calls,
  );
}

// Lookups of a fresh string object (a header value), in a V8 Map (hash, probe, compare contents) and in the
// sticky table (keyed hash, one index bucket, one record). The copies are made in batches outside the timer.
for (const size of [1_000, 1_000_000]) {
  const keys = Array.from({ length: size }, newSessionId);
  const map = new Map(keys.map((k, i) => [k, i]));
  const table = new StickyTable(size, BENCH_HASH_KEY);
  for (const key of keys) table.bind(key, hashSession(key), "b", Number.MAX_VALUE, 0);
  const lookups: [string, (key: string) => number][] = [
    ["Map.get", (key) => map.get(key)!],
    ["StickyTable.get", (key) => (table.get(key, 0) === "b" ? 1 : 0)],
  ];
  for (const [label, lookup] of lookups) {
    const random = new SeededRandom(size);
    const copies = new Array<string>(512);
    const results: number[] = [];
    for (let run = 0; run < 9; run++) {
      gc();
      let elapsed = 0n;
      let x = 0;
      for (let done = 0; done < CALLS / 4; done += 512) {
        for (let j = 0; j < 512; j++) copies[j] = freshCopy(keys[random.int(size)]!);
        const start = process.hrtime.bigint();
        for (let j = 0; j < 512; j++) x += lookup(copies[j]!);
        elapsed += process.hrtime.bigint() - start;
      }
      sink += x;
      if (run >= 2) results.push(Number(elapsed) / (CALLS / 4));
    }
    console.log(
      `| ${label} of a fresh 36-char string, ${size.toLocaleString("en-US")} entries | ${median(results).toFixed(1)} |`,
    );
  }
}

// Dependent loads over a random cycle: the price of a cache miss on this machine.
for (const mb of [1, 16, 128]) {
  const n = (mb * 1024 * 1024) / 4;
  const next = new Int32Array(n);
  for (let i = 0; i < n; i++) next[i] = i;
  const random = new SeededRandom(mb);
  for (let i = n - 1; i > 0; i--) {
    const j = random.int(i); // Sattolo: one cycle through every element
    const t = next[i]!;
    next[i] = next[j]!;
    next[j] = t;
  }
  await time(`one dependent random load in a ${mb} MB array`, () => {
    let p = 0;
    for (let i = 0; i < CALLS; i++) p = next[p]!;
    return p;
  });
}

// The whole hit path on a cache-resident table, with each clock and recorder, to attribute them.
const list = engines(16);
const bound = Array.from({ length: 1000 }, newSessionId);
for (const [label, clock, recorder] of [
  ["hit path, 1,000 sessions, 16 engines, ManualClock, no-op recorder", new ManualClock(0), undefined],
  ["hit path, same, systemClock, no-op recorder", systemClock, undefined],
  [
    "hit path, same, systemClock, GatewayMetrics recorder",
    systemClock,
    new GatewayMetrics({ backends: () => [], queueDepth: () => 0 }),
  ],
] as const) {
  const scheduler = new PlacementService({
    store: new MemoryBindingStore(new StickyTable(1_000_000, BENCH_HASH_KEY)),
    clock,
    balancer: createBalancer("least_inflight", new SeededRandom(1)),
    recorder: recorder ?? { hit() {}, miss() {}, broken() {}, spill() {} },
    stickyTtlMs: 1_800_000,
    loadFactor: 1.25,
    sessionless: "prefix",
  });
  for (const id of bound) await scheduler.place(id, "small", list);
  const random = new SeededRandom(2);
  const turns = Array.from({ length: CALLS }, () => bound[random.int(1000)]!);
  await time(`${label} (same string objects)`, async () => {
    let hits = 0;
    for (let i = 0; i < CALLS; i++) if ((await scheduler.place(turns[i], "small", list))?.affinityHit) hits++;
    return hits;
  });
}
if (sink === 0.5) console.log(sink);
