// Study 2 of the original: affinity ON vs OFF (fresh ids, as it ran it) vs disabled for real (TTL 0).
import { analyze, pct, sec, type ConditionNumbers } from "../analysis.js";
import { StudyEnvironment, externalTarget, type EngineSpec, type StudyTarget } from "../environment.js";
import { metricValue, scrapeMetrics } from "../../metrics/prometheus-text.js";
import type { StudyOptions } from "../progress.js";
import type { Check, StudyResult } from "../result.js";
import { runSessions, type RequestRecord } from "../session-runner.js";
import { barChart } from "../svg-charts.js";
import { generateWorkload, type WorkloadSpec } from "../workload.js";

export const SMALL_ENGINES: EngineSpec[] = [
  { id: "small-0", tier: "small", profile: "qwen2.5-7b", model: "Qwen/Qwen2.5-7B-Instruct" },
  { id: "small-1", tier: "small", profile: "qwen2.5-7b", model: "Qwen/Qwen2.5-7B-Instruct" },
];

interface Condition {
  name: "on" | "off" | "ttl0";
  label: string;
  sessions: number;
  turns: number;
  stickyTtlSeconds: number;
}

const CONDITIONS: Condition[] = [
  { name: "on", label: "affinity ON", sessions: 12, turns: 6, stickyTtlSeconds: 1800 },
  {
    name: "off",
    label: "OFF as the original ran it (fresh ids)",
    sessions: 72,
    turns: 1,
    stickyTtlSeconds: 1800,
  },
  { name: "ttl0", label: "affinity disabled (TTL 0)", sessions: 12, turns: 6, stickyTtlSeconds: 0 },
];

const CONCURRENCY = 6;

interface ConditionResult extends ConditionNumbers {
  name: string;
  label: string;
  /** From the gateway's /metrics: hits / (hits + misses) over this condition, tier small. */
  metricsHits: number;
  metricsMisses: number;
  metricsHitRate: number;
}

export async function runAffinityStudy(options: StudyOptions): Promise<StudyResult> {
  const scale = options.quick ? 3 : 1; // quick: 4 x 6 and 24 x 1 requests instead of 12 x 6 and 72 x 1
  const results: ConditionResult[] = [];
  const records: RequestRecord[] = [];
  const configs: unknown[] = [];
  const notes: string[] = [];
  for (const condition of CONDITIONS) {
    if (options.gatewayUrl !== undefined && condition.name === "ttl0") {
      notes.push(
        "TTL-0 condition skipped: it needs a gateway configured with sticky_ttl_seconds: 0 (--gateway was given).",
      );
      continue;
    }
    const spec: WorkloadSpec = {
      seed: options.seed,
      sessions: condition.sessions / scale,
      turns: condition.turns,
      systemPromptChars: 3000,
      sharedSystemPrompt: true,
      userChars: 300,
      maxTokens: 256,
      toolCallRate: 0,
      thinkTimeMs: 0,
      idPrefix: `${options.runId}-${condition.name}`,
    };
    const target: StudyTarget =
      options.gatewayUrl !== undefined
        ? externalTarget(options.gatewayUrl)
        : await StudyEnvironment.start({
            engines: SMALL_ENGINES,
            config: { affinity: { sticky_ttl_seconds: condition.stickyTtlSeconds } },
            timeScale: options.timeScale,
            seed: options.seed,
          });
    if (target instanceof StudyEnvironment) configs.push(target.config);
    try {
      const sessions = generateWorkload(spec);
      const before = await scrapeMetrics(target.url);
      options.progress.start(`affinity:${condition.name}`, sessions.length * condition.turns);
      const conditionRecords = await runSessions({
        condition: condition.name,
        sessions,
        concurrency: CONCURRENCY,
        pool: target.pool,
        timeScale: target.timeScale,
        stream: true,
        tierHint: "small",
        onRecord: (r) => options.progress.tick(!r.ok),
      });
      options.progress.done();
      const after = await scrapeMetrics(target.url);
      const delta = (name: string): number =>
        metricValue(after, name, { tier: "small" }) - metricValue(before, name, { tier: "small" });
      const metricsHits = delta("agentserve_affinity_hits_total");
      const metricsMisses = delta("agentserve_affinity_misses_total");
      records.push(...conditionRecords);
      results.push({
        name: condition.name,
        label: `${condition.label}, ${spec.sessions} x ${condition.turns}`,
        ...analyze(conditionRecords, target.timeScale),
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
    title: "Affinity study (the original's Study 2, on simulated engines)",
    description:
      `Two qwen2.5-7b engines in the small tier, concurrency ${CONCURRENCY}, a shared 3,000-character system prompt, ` +
      "300-character user turns, streaming with max_tokens 256. Each condition runs on freshly started engines " +
      "(empty caches) and a fresh gateway.",
    seed: options.seed,
    timeScale: options.timeScale,
    configs,
    records,
    tables: [
      {
        title: "Per condition (latencies in simulated seconds)",
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
        rows: results.map((r) => [
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
            label: r.name,
            values: [r.bindingHitRate * 100, r.prefixCacheHitRate * 100],
          })),
          yMax: 100,
        }),
      },
      {
        file: "affinity-latency.svg",
        caption: "TTFT and E2E p50 per condition (simulated seconds)",
        svg: barChart({
          title: "Latency p50 per condition",
          yLabel: "seconds (simulated)",
          series: ["cold TTFT p50", "warm TTFT p50", "E2E p50"],
          groups: results.map((r) => ({
            label: r.name,
            values: [r.coldTtftP50Seconds, r.warmTtftP50Seconds, r.e2eP50Seconds].map((v) =>
              Number.isNaN(v) ? 0 : v,
            ),
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
  if (ttl0)
    checks.push({
      claim: "ttl0: hit rate 0%",
      passed: ttl0.bindingHits === 0,
      detail: pct(ttl0.bindingHitRate),
    });
  return checks;
}
