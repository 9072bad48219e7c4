// Cost of AffinityScheduler.selectBackend on the hit path and the miss path, for 4, 16 and 64 engines.
//
// Run: node --expose-gc --import tsx bench/affinity/select.ts [--runs 9] [--calls 200000] [--metrics]
// Each run times `calls` selections (hrtime around each batch of 512, no per-call timer); the median of the
// runs after warm-up is reported. Session ids are made outside the timer, just before their batch.
import { parseArgs } from "node:util";
import { AffinityScheduler, type AffinityRecorder } from "../../src/affinity/scheduler.js";
import { StickyTable } from "../../src/affinity/sticky-table.js";
import { systemClock } from "../../src/core/clock.js";
import { SeededRandom } from "../../src/core/random.js";
import { GatewayMetrics } from "../../src/metrics/gateway-metrics.js";
import { engines, freshCopy, gc, machine, median, newSessionId } from "./common.js";

const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "9" },
    warmup: { type: "string", default: "3" },
    calls: { type: "string", default: "200000" },
    bound: { type: "string", default: "100000" },
    capacity: { type: "string", default: "1000000" },
    metrics: { type: "boolean", default: false },
  },
});
const RUNS = Number(args.runs);
const WARMUP = Number(args.warmup);
const CALLS = Number(args.calls);
/** Sessions bound before the hit-path runs: the working set a busy gateway keeps warm. */
const BOUND = Number(args.bound);
/** max_bindings of the miss-path table, filled first so every new session evicts the oldest (steady state). */
const CAPACITY = Number(args.capacity);

class PlainRecorder implements AffinityRecorder {
  hits = 0;
  misses = 0;
  brokenCount = 0;
  hit(): void {
    this.hits++;
  }
  miss(): void {
    this.misses++;
  }
  broken(_tier: string, count: number): void {
    this.brokenCount += count;
  }
}

function recorder(): AffinityRecorder {
  return args.metrics ? new GatewayMetrics({ backends: () => [], queueDepth: () => 0 }) : new PlainRecorder();
}

function scheduler(store: StickyTable): AffinityScheduler {
  return new AffinityScheduler({
    store,
    clock: systemClock,
    random: new SeededRandom(1),
    recorder: recorder(),
    stickyTtlSeconds: 1800,
  });
}

let sink = 0;
/** Inputs are made in small batches just before they are used, so they are as cache-hot as a just-parsed header. */
const BATCH = 512;

/**
 * Times `CALLS` selections, made in batches of BATCH sessions from `nextSession` (untimed); returns ns per
 * call. Only the selectBackend loop of each batch is inside the timer (hrtime's own cost is < 1 ns per call).
 */
function timeRun(
  subject: AffinityScheduler,
  nextSession: () => string,
  list: ReturnType<typeof engines>,
  expectHit: boolean,
): number {
  gc();
  const batch = new Array<string>(BATCH);
  let elapsed = 0n;
  let hits = 0;
  for (let done = 0; done < CALLS; done += BATCH) {
    for (let i = 0; i < BATCH; i++) batch[i] = nextSession();
    const start = process.hrtime.bigint();
    for (let i = 0; i < BATCH; i++) {
      const selection = subject.selectBackend(batch[i], "small", list);
      if (selection !== undefined && selection.affinityHit) hits++;
    }
    elapsed += process.hrtime.bigint() - start;
  }
  const calls = Math.ceil(CALLS / BATCH) * BATCH;
  if (hits !== (expectHit ? calls : 0)) throw new Error(`expected every call to ${expectHit ? "hit" : "miss"}`);
  sink += hits;
  return Number(elapsed) / calls;
}

function hitPath(backendCount: number, freshStrings: boolean): number {
  const list = engines(backendCount);
  const subject = scheduler(new StickyTable(Math.max(CAPACITY, BOUND)));
  const bound = Array.from({ length: BOUND }, newSessionId);
  for (const id of bound) subject.selectBackend(id, "small", list);
  const random = new SeededRandom(backendCount);
  // A later turn of a random bound session: a new header string (or, for comparison, the bound object itself).
  const nextTurn = freshStrings
    ? () => freshCopy(bound[random.int(BOUND)]!)
    : () => bound[random.int(BOUND)]!;
  const results: number[] = [];
  for (let run = 0; run < WARMUP + RUNS; run++) {
    const ns = timeRun(subject, nextTurn, list, true);
    if (run >= WARMUP) results.push(ns);
  }
  return median(results);
}

function missPath(backendCount: number): number {
  const list = engines(backendCount);
  const subject = scheduler(new StickyTable(CAPACITY));
  for (let i = 0; i < CAPACITY; i++) subject.selectBackend(newSessionId(), "small", list);
  const results: number[] = [];
  for (let run = 0; run < WARMUP + RUNS; run++) {
    const ns = timeRun(subject, newSessionId, list, false);
    if (run >= WARMUP) results.push(ns);
  }
  return median(results);
}

const rows: string[] = [];
console.log(`# selectBackend cost, ns per call (median of ${RUNS} runs of ${CALLS} calls after ${WARMUP} warm-up runs)`);
console.log(`# ${machine()}; recorder: ${args.metrics ? "GatewayMetrics (prom-client)" : "plain counters"}`);
console.log(`# hit path: ${BOUND} bound sessions; miss path: new sessions into a full table of ${CAPACITY} (evicting)`);
for (const n of [4, 16, 64]) {
  const hitFresh = hitPath(n, true);
  const hitReused = hitPath(n, false);
  const miss = missPath(n);
  rows.push(`| ${n} | ${hitFresh.toFixed(0)} | ${hitReused.toFixed(0)} | ${miss.toFixed(0)} |`);
  console.log(`backends=${n} hit(fresh header string)=${hitFresh.toFixed(0)} ns hit(same string object)=${hitReused.toFixed(0)} ns miss=${miss.toFixed(0)} ns`);
}
console.log("\n| backends | hit path, fresh header string (ns) | hit path, same string object (ns) | miss path, evicting table (ns) |");
console.log("| ---: | ---: | ---: | ---: |");
for (const row of rows) console.log(row);
if (sink < 0) console.log(sink);
