// Long agent sessions: affinity vs the balancers alone (least in-flight, round-robin, random).
import type { BalancerName } from "../../affinity/balancers.js";
import { analyze, pct, sec, type ConditionNumbers } from "../analysis.js";
import { StudyEnvironment, externalTarget, type EngineSpec, type StudyTarget } from "../environment.js";
import type { StudyOptions } from "../progress.js";
import type { Check, StudyResult } from "../result.js";
import { runCondition, type RequestRecord } from "../session-runner.js";
import { barChart } from "../svg-charts.js";
import { generateWorkload } from "../workload.js";

interface Policy {
  name: string;
  label: string;
  stickyTtlSeconds: number;
  balancer: BalancerName;
}

const POLICIES: Policy[] = [
  { name: "affinity", label: "affinity (TTL 1800 s)", stickyTtlSeconds: 1800, balancer: "least_inflight" },
  {
    name: "least_inflight",
    label: "TTL 0, least in-flight",
    stickyTtlSeconds: 0,
    balancer: "least_inflight",
  },
  { name: "round_robin", label: "TTL 0, round-robin", stickyTtlSeconds: 0, balancer: "round_robin" },
  { name: "random", label: "TTL 0, random", stickyTtlSeconds: 0, balancer: "random" },
];

const CONCURRENCY = 6;

/** Four engines: with two, each engine already holds most of every session's history under any policy. */
const FOUR_SMALL: EngineSpec[] = [0, 1, 2, 3].map((i) => ({
  id: `small-${i}`,
  tier: "small",
  profile: "qwen2.5-7b",
  model: "Qwen/Qwen2.5-7B-Instruct",
}));

export async function runSessionsStudy(options: StudyOptions): Promise<StudyResult> {
  const policies =
    options.gatewayUrl === undefined
      ? POLICIES
      : [{ ...POLICIES[0]!, label: "the running gateway's policy" }];
  const results: (ConditionNumbers & { name: string; label: string })[] = [];
  const records: RequestRecord[] = [];
  const configs: unknown[] = [];
  for (const policy of policies) {
    const target: StudyTarget =
      options.gatewayUrl !== undefined
        ? externalTarget(options.gatewayUrl)
        : await StudyEnvironment.start({
            engines: FOUR_SMALL,
            config: { affinity: { sticky_ttl_seconds: policy.stickyTtlSeconds, balancer: policy.balancer } },
            timeScale: options.timeScale,
            seed: options.seed,
          });
    if (target instanceof StudyEnvironment) configs.push(target.config);
    try {
      // The same seed for every policy: identical sessions, prompts and order.
      const sessions = generateWorkload({
        seed: options.seed,
        sessions: options.quick ? 8 : 12,
        turns: options.quick ? { min: 4, max: 6 } : { min: 15, max: 25 },
        systemPromptChars: 3000,
        sharedSystemPrompt: false,
        userChars: 300,
        maxTokens: 128,
        toolCallRate: 0.5,
        toolResultChars: { min: 500, max: 2500 },
        thinkTimeMs: 2000,
        idPrefix: `${options.runId}-${policy.name}`,
      });
      const run = await runCondition(
        `sessions:${policy.name}`,
        policy.name,
        sessions,
        CONCURRENCY,
        target,
        options.progress,
      );
      records.push(...run);
      results.push({ name: policy.name, label: policy.label, ...analyze(run, target.timeScale) });
    } finally {
      await target.close();
    }
  }
  const affinity = results.find((r) => r.name === "affinity");
  const checks: Check[] = results.map((r) => ({
    claim: `${r.name}: no failed request`,
    passed: r.failed === 0,
    detail: `${r.failed}/${r.requests}`,
  }));
  for (const other of results.filter((r) => r.name === "round_robin" || r.name === "random")) {
    if (!affinity) break;
    checks.push({
      claim: `affinity beats ${other.name} on prefix-cache hit rate`,
      passed: affinity.prefixCacheHitRate > other.prefixCacheHitRate,
      detail: `${pct(affinity.prefixCacheHitRate)} vs ${pct(other.prefixCacheHitRate)}`,
    });
    checks.push({
      claim: `affinity beats ${other.name} on TTFT p50`,
      passed: affinity.ttftP50Seconds < other.ttftP50Seconds,
      detail: `${sec(affinity.ttftP50Seconds)} s vs ${sec(other.ttftP50Seconds)} s`,
    });
    checks.push({
      claim: `affinity beats ${other.name} on E2E p50`,
      passed: affinity.e2eP50Seconds < other.e2eP50Seconds,
      detail: `${sec(affinity.e2eP50Seconds)} s vs ${sec(other.e2eP50Seconds)} s`,
    });
  }
  return {
    study: "sessions",
    title: "Long agent sessions: affinity vs balancing alone",
    description:
      `Four qwen2.5-7b engines in the small tier; ${options.quick ? "8 sessions of 4-6" : "12 sessions of 15-25"} turns, ` +
      `${CONCURRENCY} at a time, each with its own 3,000-character system prompt (tool definitions included), ` +
      "300-character user turns, a tool round (result of 500-2,500 characters) on half the turns, 2 s of think " +
      "time between turns (simulated), " +
      "streaming with max_tokens 128. The same sessions run under each policy on fresh engines.",
    seed: options.seed,
    timeScale: options.timeScale,
    configs,
    records,
    tables: [
      {
        title: "Per policy (latencies in simulated seconds)",
        columns: [
          "policy",
          "requests",
          "failed",
          "binding hit rate",
          "engine prefix-cache hit rate",
          "TTFT p50",
          "TTFT p95",
          "E2E p50",
          "E2E p95",
        ],
        rows: results.map((r) => [
          r.label,
          r.requests,
          r.failed,
          pct(r.bindingHitRate),
          pct(r.prefixCacheHitRate),
          sec(r.ttftP50Seconds),
          sec(r.ttftP95Seconds),
          sec(r.e2eP50Seconds),
          sec(r.e2eP95Seconds),
        ]),
      },
    ],
    charts: [
      {
        file: "sessions-cache.svg",
        caption: "Engine prefix-cache hit rate per policy",
        svg: barChart({
          title: "Real KV reuse per policy",
          yLabel: "% of prompt tokens cached",
          series: ["prefix-cache hit rate"],
          groups: results.map((r) => ({ label: r.label, values: [r.prefixCacheHitRate * 100] })),
          yMax: 100,
        }),
      },
      {
        file: "sessions-latency.svg",
        caption: "TTFT and E2E per policy (simulated seconds)",
        svg: barChart({
          title: "Latency per policy",
          yLabel: "seconds (simulated)",
          series: ["TTFT p50", "TTFT p95", "E2E p50"],
          groups: results.map((r) => ({
            label: r.label,
            values: [r.ttftP50Seconds, r.ttftP95Seconds, r.e2eP50Seconds],
          })),
          valueFormat: (v: number) => v.toFixed(2),
        }),
      },
    ],
    checks,
    notes:
      options.gatewayUrl === undefined
        ? []
        : ["Only the running gateway's own policy was measured (--gateway was given)."],
    data: Object.fromEntries(results.map((r) => [r.name, r])),
  };
}
