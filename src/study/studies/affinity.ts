// Study 2 of the original: affinity ON vs OFF (fresh ids, as it ran it) vs disabled for real (TTL 0; on real
// engines also TTL 0 with round-robin placement).
import type { BalancerName } from "../../affinity/balancers.js";
import { analyze, count, pct, sec, type ConditionNumbers } from "../analysis.js";
import { StudyEnvironment, externalTarget, type EngineSpec, type StudyTarget } from "../environment.js";
import { metricValue, scrapeMetrics } from "../../metrics/prometheus-text.js";
import type { StudyOptions } from "../progress.js";
import type { Check, StudyResult, Table } from "../result.js";
import { runCondition, type RequestRecord } from "../session-runner.js";
import { barChart } from "../svg-charts.js";
import { lostByCauseText, lostShareText, receiptNumbers, type ReceiptNumbers } from "../receipt-table.js";
import { generateWorkload, type WorkloadSpec } from "../workload.js";

export const SMALL_ENGINES: EngineSpec[] = [
  { id: "small-0", tier: "small", profile: "qwen2.5-7b", model: "Qwen/Qwen2.5-7B-Instruct" },
  { id: "small-1", tier: "small", profile: "qwen2.5-7b", model: "Qwen/Qwen2.5-7B-Instruct" },
];

/** `--engines real`: two llama.cpp engines serving the generated random-weight model (agent-serve engine). */
const REAL_ENGINES: EngineSpec[] = SMALL_ENGINES.map((e) => ({ ...e, model: "random-llama-small" }));
/** Real compute is slow on a CPU: short replies. */
const REAL_MAX_TOKENS = 32;

/** The busy fleet of the leading comparison: four engines, so a policy that does not stick scatters sessions. */
const BUSY_ENGINES: EngineSpec[] = [0, 1, 2, 3].map((i) => ({
  id: `small-${i}`,
  tier: "small",
  profile: "qwen2.5-7b",
  model: "Qwen/Qwen2.5-7B-Instruct",
}));
const BUSY_CONCURRENCY = 16;

interface Condition {
  name: "busy_on" | "busy_off" | "on" | "off" | "ttl0" | "ttl0_rr";
  label: string;
  sessions: number;
  turns: number;
  stickyTtlSeconds: number;
  /** TTL 0's balancer (default least in-flight). */
  balancer?: BalancerName;
  /**
   * Real engines only: with no think time, least in-flight happens to send a session's next turn back to the
   * engine it just left, so TTL 0 alone does not show what losing affinity costs there.
   */
  realOnly?: boolean;
  /** The busy fleet (four engines, concurrency 16), simulated engines only. */
  busy?: boolean;
}

const CONDITIONS: Condition[] = [
  // The leading comparison: enough sessions and load that least in-flight, without affinity, scatters them.
  {
    name: "busy_on",
    label: "busy fleet, affinity ON",
    sessions: 32,
    turns: 6,
    stickyTtlSeconds: 1800,
    busy: true,
  },
  {
    name: "busy_off",
    label: "busy fleet, affinity disabled (TTL 0)",
    sessions: 32,
    turns: 6,
    stickyTtlSeconds: 0,
    busy: true,
  },
  { name: "on", label: "affinity ON", sessions: 12, turns: 6, stickyTtlSeconds: 1800 },
  {
    name: "off",
    label: "OFF as the original ran it (fresh ids)",
    sessions: 72,
    turns: 1,
    stickyTtlSeconds: 1800,
  },
  { name: "ttl0", label: "affinity disabled (TTL 0)", sessions: 12, turns: 6, stickyTtlSeconds: 0 },
  {
    name: "ttl0_rr",
    label: "affinity disabled (TTL 0), round-robin",
    sessions: 12,
    turns: 6,
    stickyTtlSeconds: 0,
    balancer: "round_robin",
    realOnly: true,
  },
];

const CONCURRENCY = 6;

interface ConditionResult extends ConditionNumbers {
  name: string;
  label: string;
  /** The condition in words, short enough for a chart's axis. */
  chartLabel: string;
  /** From the gateway's /metrics: hits / (hits + misses) over this condition, tier small. */
  metricsHits: number;
  metricsMisses: number;
  metricsHitRate: number;
  receipts: ReceiptNumbers;
}

export async function runAffinityStudy(options: StudyOptions): Promise<StudyResult> {
  const real = options.engines === "real";
  const results: ConditionResult[] = [];
  const records: RequestRecord[] = [];
  const configs: unknown[] = [];
  const notes: string[] = [];
  for (const condition of CONDITIONS) {
    if (condition.realOnly && !real) continue;
    if (condition.busy && real) continue; // four CPU engines at concurrency 16 would take an hour
    if (options.gatewayUrl !== undefined && condition.busy) continue;
    if (options.gatewayUrl !== undefined && condition.name === "ttl0") {
      notes.push(
        "TTL-0 condition skipped: it needs a gateway configured with sticky_ttl_seconds: 0 (--gateway was given).",
      );
      continue;
    }
    const spec: WorkloadSpec = {
      seed: options.seed,
      // quick: the busy fleet runs a quarter of its sessions (8), the others a third.
      sessions: condition.sessions / (options.quick ? (condition.busy ? 4 : 3) : 1),
      turns: condition.turns,
      systemPromptChars: 3000,
      sharedSystemPrompt: options.sharedSystemPrompt ?? false,
      userChars: 300,
      maxTokens: real ? REAL_MAX_TOKENS : 256,
      toolCallRate: 0,
      thinkTimeMs: 0,
      idPrefix: `${options.runId}-${condition.name}`,
    };
    const target: StudyTarget =
      options.gatewayUrl !== undefined
        ? externalTarget(options.gatewayUrl)
        : await StudyEnvironment.start({
            engines: real ? REAL_ENGINES : condition.busy ? BUSY_ENGINES : SMALL_ENGINES,
            engineKind: options.engines,
            // A slot per session that may run at once: a slot-based engine with fewer thrashes its histories.
            realEngineSlots: CONCURRENCY,
            config: {
              affinity: {
                sticky_ttl_seconds: condition.stickyTtlSeconds,
                ...(condition.balancer ? { balancer: condition.balancer } : {}),
              },
            },
            timeScale: options.timeScale,
            seed: options.seed,
          });
    if (target instanceof StudyEnvironment) configs.push(target.config);
    try {
      const sessions = generateWorkload(spec);
      const before = await scrapeMetrics(target.url);
      const conditionRecords = await runCondition(
        `affinity:${condition.name}`,
        condition.name,
        sessions,
        condition.busy ? BUSY_CONCURRENCY : CONCURRENCY,
        target,
        options.progress,
      );
      const after = await scrapeMetrics(target.url);
      const delta = (name: string): number =>
        metricValue(after, name, { tier: "small" }) - metricValue(before, name, { tier: "small" });
      const metricsHits = delta("agentserve_affinity_hits_total");
      const metricsMisses = delta("agentserve_affinity_misses_total");
      records.push(...conditionRecords);
      results.push({
        name: condition.name,
        label: `${condition.label}, ${spec.sessions} x ${condition.turns}`,
        chartLabel: condition.label,
        ...analyze(conditionRecords, target.timeScale),
        receipts: receiptNumbers(conditionRecords),
        metricsHits,
        metricsMisses,
        metricsHitRate: metricsHits + metricsMisses === 0 ? 0 : metricsHits / (metricsHits + metricsMisses),
      });
    } finally {
      await target.close();
    }
  }
  return {
    study: "affinity",
    title: `Affinity study (the original's Study 2, on ${real ? "real llama.cpp" : "simulated"} engines)`,
    // The busy comparison's verdict leads the report and the terminal, whichever way it came out.
    ...verdictOf(busyVerdict(results)),
    description:
      (real
        ? "Two real llama.cpp engines (agent-serve engine: the generated 80M-parameter random-weight model, CPU, " +
          "slots reusing their longest common prefix) in the small tier"
        : "Two qwen2.5-7b engines in the small tier") +
      `, concurrency ${CONCURRENCY}, a 3,000-character system prompt ${options.sharedSystemPrompt ? "shared by all sessions" : "of each session's own"}, ` +
      `300-character user turns, streaming with max_tokens ${real ? REAL_MAX_TOKENS : 256}. Each condition runs ` +
      "on freshly started engines (empty caches) and a fresh gateway." +
      (real ? " Latencies are wall-clock." : ""),
    seed: options.seed,
    timeScale: options.timeScale,
    configs,
    records,
    tables: [
      ...busyComparison(results),
      {
        title: `Per condition (latencies in ${real ? "wall-clock" : "simulated"} seconds)`,
        columns: [
          "condition",
          "requests",
          "failed",
          "hit rate (x_agent_serve)",
          "hit rate (/metrics)",
          "engine prefix-cache hit rate",
          "TTFT p50",
          "TTFT p95",
          "E2E p50",
          "E2E p95",
          "cold TTFT p50",
          "warm TTFT p50",
        ],
        rows: results
          .filter((r) => !r.name.startsWith("busy_"))
          .map((r) => [
            r.label,
            r.requests,
            r.failed,
            `${pct(r.bindingHitRate)} (${r.bindingHits}/${r.requests - r.failed})`,
            `${pct(r.metricsHitRate)} (${r.metricsHits}/${r.metricsHits + r.metricsMisses})`,
            pct(r.prefixCacheHitRate),
            sec(r.ttftP50Seconds),
            sec(r.ttftP95Seconds),
            sec(r.e2eP50Seconds),
            sec(r.e2eP95Seconds),
            sec(r.coldTtftP50Seconds),
            sec(r.warmTtftP50Seconds),
          ]),
      },
    ],
    charts: [
      {
        file: "affinity-hit-rates.svg",
        caption: "Binding hit rate vs the engines' real prefix-cache hit rate, per condition",
        svg: barChart({
          title: "Binding hits vs real KV reuse",
          yLabel: "%",
          series: ["binding hit rate", "engine prefix-cache hit rate"],
          groups: results.map((r) => ({
            label: r.chartLabel,
            values: [r.bindingHitRate * 100, r.prefixCacheHitRate * 100],
          })),
          yMax: 100,
        }),
      },
      {
        file: "affinity-latency.svg",
        caption: `TTFT and E2E p50 per condition (${real ? "wall-clock" : "simulated"} seconds)`,
        svg: barChart({
          title: "Latency p50 per condition",
          yLabel: real ? "seconds" : "seconds (simulated)",
          series: ["cold TTFT p50", "warm TTFT p50", "E2E p50"],
          groups: results.map((r) => ({
            label: r.chartLabel,
            // A number no turn had (the fresh-ids condition has no warm turn) is no bar: "-" as in the table.
            values: [r.coldTtftP50Seconds, r.warmTtftP50Seconds, r.e2eP50Seconds],
          })),
          valueFormat: (v) => v.toFixed(2),
        }),
      },
    ],
    checks: affinityChecks(results),
    notes,
    data: Object.fromEntries(results.map((r) => [r.name, r])),
  };
}

function affinityChecks(results: ConditionResult[]): Check[] {
  const checks: Check[] = [];
  const on = results.find((r) => r.name === "on");
  const off = results.find((r) => r.name === "off");
  const ttl0 = results.find((r) => r.name === "ttl0");
  for (const r of results) {
    checks.push({
      claim: `${r.name}: no failed request`,
      passed: r.failed === 0,
      detail: `${r.failed} of ${r.requests} failed`,
    });
    checks.push({
      claim: `${r.name}: x_agent_serve and /metrics agree`,
      passed: r.bindingHits === r.metricsHits && r.requests - r.failed === r.metricsHits + r.metricsMisses,
      detail: `metadata ${r.bindingHits}/${r.requests - r.failed}, metrics ${r.metricsHits}/${r.metricsHits + r.metricsMisses}`,
    });
  }
  if (on) {
    const expected = (on.requests * 5) / 6;
    checks.push({
      claim: "on: hit rate is exactly 5/6 (turn 1 misses, turns 2-6 hit)",
      passed: on.bindingHits === expected && on.failed === 0,
      detail: `${on.bindingHits}/${on.requests} = ${pct(on.bindingHitRate)}`,
    });
    checks.push({
      claim: "on: warm-turn TTFT p50 at least 3x lower than cold-turn TTFT p50",
      passed: on.warmTtftP50Seconds * 3 <= on.coldTtftP50Seconds,
      detail: `cold ${sec(on.coldTtftP50Seconds)} s, warm ${sec(on.warmTtftP50Seconds)} s (${(on.coldTtftP50Seconds / on.warmTtftP50Seconds).toFixed(1)}x)`,
    });
  }
  if (off)
    checks.push({
      claim: "off: hit rate 0%",
      passed: off.bindingHits === 0,
      detail: pct(off.bindingHitRate),
    });
  for (const disabled of [ttl0, results.find((r) => r.name === "ttl0_rr")]) {
    if (disabled)
      checks.push({
        claim: `${disabled.name}: hit rate 0%`,
        passed: disabled.bindingHits === 0,
        detail: pct(disabled.bindingHitRate),
      });
  }
  return checks;
}

/**
 * The leading table: affinity ON vs disabled on the busy fleet, in what the engines reused, the tokens the
 * route receipts say were lost (and why), and TTFT, beside binding hits.
 */
function busyComparison(results: ConditionResult[]): Table[] {
  const busy = results.filter((r) => r.name.startsWith("busy_"));
  if (busy.length === 0) return [];
  return [
    {
      title: `Does affinity pay? A busy fleet: 4 engines, concurrency ${BUSY_CONCURRENCY} (simulated seconds)`,
      columns: [
        "condition",
        "binding hits",
        "engine prefix-cache reuse",
        "reusable tokens",
        "lost tokens",
        "lost by cause",
        "TTFT p50",
        "TTFT p95",
        "warm TTFT p50",
        "E2E p50",
      ],
      rows: busy.map((r) => [
        r.label,
        pct(r.bindingHitRate),
        pct(r.prefixCacheHitRate),
        count(r.receipts.reusableTokens),
        lostShareText(r.receipts),
        lostByCauseText(r.receipts.lostByCause),
        sec(r.ttftP50Seconds),
        sec(r.ttftP95Seconds),
        sec(r.warmTtftP50Seconds),
        sec(r.e2eP50Seconds),
      ]),
    },
  ];
}

/** The verdict member of a result: the sentences joined, none when there is nothing to say. */
function verdictOf(sentences: string[]): { verdict?: string } {
  return sentences.length === 0 ? {} : { verdict: sentences.join(" ") };
}

/** A difference this large in reuse (percentage points) or warm TTFT (ratio) counts as affinity showing. */
const REUSE_DIFFERENCE_POINTS = 10;
const WARM_TTFT_RATIO = 1.5;

/** What the busy comparison says, in one sentence for the report, whichever way it came out. */
function busyVerdict(results: ConditionResult[]): string[] {
  const on = results.find((r) => r.name === "busy_on");
  const off = results.find((r) => r.name === "busy_off");
  if (on === undefined || off === undefined) return [];
  const points = (on.prefixCacheHitRate - off.prefixCacheHitRate) * 100;
  const ttftRatio = off.warmTtftP50Seconds / on.warmTtftP50Seconds;
  const numbers =
    `4 engines, ${on.requests / 6} sessions x 6 turns at concurrency ${BUSY_CONCURRENCY}: ` +
    `engine prefix-cache reuse ${pct(on.prefixCacheHitRate)} with affinity vs ${pct(off.prefixCacheHitRate)} without, ` +
    `${count(on.receipts.lostTokens)} vs ${count(off.receipts.lostTokens)} tokens lost, ` +
    `warm-turn TTFT p50 ${sec(on.warmTtftP50Seconds)} s vs ${sec(off.warmTtftP50Seconds)} s`;
  if (points >= REUSE_DIFFERENCE_POINTS || ttftRatio >= WARM_TTFT_RATIO)
    return [`The busy fleet shows what affinity is for: ${numbers}.`];
  return [
    `The busy fleet does NOT show a difference here (under ${REUSE_DIFFERENCE_POINTS} points of reuse and ` +
      `${WARM_TTFT_RATIO}x warm TTFT): ${numbers}. On this workload a non-sticky policy loses little.`,
  ];
}
