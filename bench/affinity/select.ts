// Cost of PlacementService.place (lookup, decision, effects) on the hit and miss paths, for 4, 16 and 64 engines.
//
// Run: node --expose-gc --import tsx bench/affinity/select.ts [--runs 7] [--warmup 2] [--calls 51200] [--metrics]
//
// Each configuration gets its own scheduler and table, is warmed up, then timed `runs` times; the median
// run (and, in brackets, the fastest: other processes on the machine only ever add time) is reported in ns
// per call. Session ids are 36-character UUIDs made as flat strings in batches of 512
// just before their batch is timed (as cache-hot as a header value the HTTP parser has just produced);
// only the place loop is inside the timer. The clock is the production systemClock.
//   hit path:  later turns of sessions drawn at random from W bound sessions, each turn a new string object
//              (so the Map must hash it and compare contents, as with a real header). W = 1,000 fits in the
//              CPU caches; W = 100,000 and 1,000,000 (the default max_bindings) do not.
//   miss path: a new session on every call, into a table already full at max_bindings = C, so every call
//              also evicts the least recently used binding (the steady state of a busy gateway).
import { parseArgs } from "node:util";
import { createBalancer } from "../../src/affinity/balancers.js";
import { MemoryBindingStore } from "../../src/affinity/memory-bindings.js";
import { PlacementService, type AffinityRecorder } from "../../src/affinity/placement-service.js";
import { StickyTable } from "../../src/affinity/sticky-table.js";
import { systemClock } from "../../src/core/clock.js";
import { SeededRandom } from "../../src/core/random.js";
import { GatewayMetrics } from "../../src/metrics/gateway-metrics.js";
import { BENCH_HASH_KEY, engines, freshCopy, gc, machine, median, newSessionId } from "./common.js";

const { values: args } = parseArgs({
  options: {
    runs: { type: "string", default: "7" },
    warmup: { type: "string", default: "2" },
    calls: { type: "string", default: "51200" },
    backends: { type: "string", default: "4,16,64" },
    "working-sets": { type: "string", default: "1000,100000,1000000" },
    capacities: { type: "string", default: "1000,1000000" },
    metrics: { type: "boolean", default: false },
  },
});
const RUNS = Number(args.runs);
const WARMUP = Number(args.warmup);
const BATCH = 512;
const CALLS = Math.ceil(Number(args.calls) / BATCH) * BATCH;
const list = (text: string) => text.split(",").map(Number);
const BACKEND_COUNTS = list(args.backends);
const WORKING_SETS = list(args["working-sets"]);
const CAPACITIES = list(args.capacities);

const noRecorder: AffinityRecorder = { hit() {}, miss() {}, broken() {}, spill() {} };

function scheduler(store: StickyTable): PlacementService {
  return new PlacementService({
    store: new MemoryBindingStore(store),
    clock: systemClock,
    balancer: createBalancer("least_inflight", new SeededRandom(1)),
    recorder: args.metrics ? new GatewayMetrics({ backends: () => [], queueDepth: () => 0 }) : noRecorder,
    stickyTtlMs: 1_800_000,
    loadFactor: 1.25,
    sessionless: "prefix",
  });
}

let sink = 0;

interface Result {
  median: number;
  min: number;
}

/** Runs warm-up plus timed runs of CALLS selections on sessions from `nextSession`; ns per call. */
async function measure(
  subject: PlacementService,
  nextSession: () => string,
  candidates: ReturnType<typeof engines>,
  expectHit: boolean,
): Promise<Result> {
  const batch = new Array<string>(BATCH);
  const results: number[] = [];
  for (let run = 0; run < WARMUP + RUNS; run++) {
    gc();
    let elapsed = 0n;
    let hits = 0;
    for (let done = 0; done < CALLS; done += BATCH) {
      for (let i = 0; i < BATCH; i++) batch[i] = nextSession();
      const start = process.hrtime.bigint();
      for (let i = 0; i < BATCH; i++) {
        if ((await subject.place(batch[i], "small", candidates))?.affinityHit) hits++;
      }
      elapsed += process.hrtime.bigint() - start;
    }
    if (hits !== (expectHit ? CALLS : 0))
      throw new Error(`expected every call to ${expectHit ? "hit" : "miss"}`);
    sink += hits;
    if (run >= WARMUP) results.push(Number(elapsed) / CALLS);
  }
  return { median: median(results), min: Math.min(...results) };
}

async function hitPath(backendCount: number, workingSet: number): Promise<Result> {
  const candidates = engines(backendCount);
  const subject = scheduler(new StickyTable(Math.max(workingSet, 1_000_000), BENCH_HASH_KEY));
  const bound = Array.from({ length: workingSet }, newSessionId);
  for (const id of bound) await subject.place(id, "small", candidates);
  const random = new SeededRandom(backendCount);
  return measure(subject, () => freshCopy(bound[random.int(workingSet)]!), candidates, true);
}

async function missPath(backendCount: number, capacity: number): Promise<Result> {
  const candidates = engines(backendCount);
  const subject = scheduler(new StickyTable(capacity, BENCH_HASH_KEY));
  for (let i = 0; i < capacity; i++) await subject.place(newSessionId(), "small", candidates);
  return measure(subject, newSessionId, candidates, false);
}

const fmt = (r: Result) => `${r.median.toFixed(0)} (${r.min.toFixed(0)})`;
console.log(
  `# PlacementService.place, ns per call: median (and fastest) of ${RUNS} runs of ${CALLS} calls, after ${WARMUP} warm-up runs`,
);
console.log(`# ${machine()}; recorder: ${args.metrics ? "GatewayMetrics (prom-client)" : "none (no-op)"}`);
const header = [
  "backends",
  ...WORKING_SETS.map((w) => `hit, ${w.toLocaleString("en-US")} sessions`),
  ...CAPACITIES.map((c) => `miss, full table of ${c.toLocaleString("en-US")}`),
];
const rows: string[][] = [];
for (const n of BACKEND_COUNTS) {
  const row = [String(n)];
  for (const w of WORKING_SETS) row.push(fmt(await hitPath(n, w)));
  for (const c of CAPACITIES) row.push(fmt(await missPath(n, c)));
  rows.push(row);
  console.log(`# backends=${n}: ${row.slice(1).join(" ")}`);
}
console.log(`\n| ${header.join(" | ")} |`);
console.log(`| ${header.map(() => "---:").join(" | ")} |`);
for (const row of rows) console.log(`| ${row.join(" | ")} |`);
if (sink < 0) console.log(sink);
