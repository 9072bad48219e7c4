// Coding-agent traffic: long growing sessions and sub-agent bursts, placed by the client's own session signal vs
// by prompt prefix only vs least-loaded.
import { count, pct, sec, simSeconds } from "../analysis.js";
import type { BurstWindow, CodingRecord } from "../coding-runner.js";
import { runCodingSessions } from "../coding-runner.js";
import { generateCodingWorkload, type CodingWorkloadSpec } from "../coding-workload.js";
import { StudyEnvironment, externalTarget, type EngineSpec, type StudyTarget } from "../environment.js";
import { STUDY_HEALTH } from "../placement-policies.js";
import type { StudyOptions } from "../progress.js";
import type { Check, StudyResult } from "../result.js";
import { percentile, ratio } from "../stats.js";
import { barChart } from "../svg-charts.js";

interface Condition {
  name: string;
  label: string;
  affinity: Record<string, unknown>;
  /** The session signal the client sends (Claude Code's own header), or none. */
  signal: boolean;
}

const CONDITIONS: Condition[] = [
  { name: "client_signals", label: "session from the client's signal", affinity: {}, signal: true },
  { name: "prefix_only", label: "prefix placement only", affinity: {}, signal: false },
  {
    name: "least_loaded",
    label: "least-loaded (sticky_ttl_seconds 0)",
    affinity: { sticky_ttl_seconds: 0, sessionless: "balancer", balancer: "least_inflight" },
    signal: false,
  },
];

/** The header Claude Code names its session with; the gateway's default session_keys read it. */
export const CLIENT_SESSION_HEADER = "x-claude-code-session-id";

const MAX_INFLIGHT = 16;
/** Qwen2.5-7B serves 128k tokens with YaRN rope scaling; coding sessions grow past 50k. */
const MAX_MODEL_LEN = 131_072;

const ENGINES: EngineSpec[] = [0, 1, 2, 3].map((i) => ({
  id: `small-${i}`,
  tier: "small",
  profile: "qwen2.5-7b",
  model: "Qwen/Qwen2.5-7B-Instruct",
  maxInflight: MAX_INFLIGHT,
  maxModelLen: MAX_MODEL_LEN,
}));

/**
 * Shapes from published coding-agent traces and the issue: a 40-50 KB system prompt with tools, tens of calls per
 * session growing past 50,000 tokens, sub-agent bursts of median 7 and 90th percentile 50, think times mostly
 * seconds (tools running) and sometimes a minute or more (a person reading and answering).
 */
function workloadSpec(options: StudyOptions, idPrefix: string): CodingWorkloadSpec {
  const quick = options.quick === true;
  return {
    seed: options.seed,
    sessions: quick ? 3 : 16,
    turns: quick ? { min: 4, max: 5 } : { min: 12, max: 20 },
    systemPromptChars: quick ? 12_000 : 48_000,
    subagentPromptChars: quick ? 4_000 : 16_000,
    toolResultChars: quick ? { min: 500, max: 2_000 } : { min: 4_000, max: 20_000 },
    replyTokens: quick ? { min: 8, max: 24 } : { min: 40, max: 240 },
    burstShare: quick ? 1 : 0.5,
    burstSize: quick ? { median: 7, p90: 7, min: 7, max: 7 } : { median: 7, p90: 50, min: 7, max: 50 },
    subagentTurns: quick ? { min: 2, max: 2 } : { min: 2, max: 4 },
    thinkSeconds: {
      short: { min: 1, max: 8 },
      long: quick ? { min: 5, max: 10 } : { min: 20, max: 90 },
      longShare: quick ? 0 : 0.1,
    },
    subagentThinkSeconds: { min: 1, max: 5 },
    idPrefix,
  };
}

export interface AgentsNumbers {
  requests: number;
  failed: number;
  subagentRequests: number;
  /** Cached prompt tokens / prompt tokens, from the engines' usage. */
  prefixCacheHitRate: number;
  mainPrefixCacheHitRate: number;
  ttftP50Seconds: number;
  ttftP99Seconds: number;
  mainTtftP50Seconds: number;
  mainTtftP99Seconds: number;
  /** Distinct engines that served a session's own calls (1 is every turn on one warm engine). */
  enginesPerSessionMean: number;
  enginesPerSessionMax: number;
  /** Distinct engines that served a session's calls, its sub-agents' included. */
  enginesPerSessionWithSubagents: number;
  /** Other sessions' own calls that started during a burst: their TTFT p99 and its ratio to their p50. */
  duringBurstRequests: number;
  duringBurstTtftP99Seconds: number;
  duringBurstP99OverP50: number;
  largestPromptTokens: number;
  /** The busiest engine's share of all calls (0.25 is an even spread over four). */
  busiestEngineShare: number;
  /** Prompt tokens the engines computed rather than read from their cache (the same workload in every condition). */
  recomputedPromptTokens: number;
}

function engines(records: readonly CodingRecord[]): Map<string, Set<string>> {
  const bySession = new Map<string, Set<string>>();
  for (const r of records) {
    if (r.backend === null) continue;
    let set = bySession.get(r.sessionId);
    if (set === undefined) bySession.set(r.sessionId, (set = new Set()));
    set.add(r.backend);
  }
  return bySession;
}

function busiestShare(records: readonly CodingRecord[]): number {
  const calls = new Map<string, number>();
  for (const r of records) if (r.backend !== null) calls.set(r.backend, (calls.get(r.backend) ?? 0) + 1);
  return ratio(Math.max(0, ...calls.values()), records.length);
}

export function agentsNumbers(
  records: readonly CodingRecord[],
  bursts: readonly BurstWindow[],
  timeScale: number,
): AgentsNumbers {
  const ok = records.filter((r) => r.status === 200 && r.ok);
  const main = ok.filter((r) => r.thread === "main");
  const ttft = (list: readonly CodingRecord[]): number[] =>
    list.flatMap((r) => (r.ttftMs === null ? [] : [simSeconds(r.ttftMs, timeScale)]));
  const cacheRate = (list: readonly CodingRecord[]): number =>
    ratio(
      list.reduce((n, r) => n + r.cachedTokens, 0),
      list.reduce((n, r) => n + r.promptTokens, 0),
    );
  const mainEngines = [...engines(main).values()].map((s) => s.size);
  const allEngines = [...engines(ok).values()].map((s) => s.size);
  const duringBurst = main.filter((r) =>
    bursts.some((b) => b.sessionId !== r.sessionId && r.startMs >= b.startMs && r.startMs < b.endMs),
  );
  const mainP50 = percentile(ttft(main), 50);
  const burstP99 = percentile(ttft(duringBurst), 99);
  return {
    requests: records.length,
    failed: records.length - ok.length,
    subagentRequests: records.filter((r) => r.thread === "subagent").length,
    prefixCacheHitRate: cacheRate(ok),
    mainPrefixCacheHitRate: cacheRate(main),
    ttftP50Seconds: percentile(ttft(ok), 50),
    ttftP99Seconds: percentile(ttft(ok), 99),
    mainTtftP50Seconds: mainP50,
    mainTtftP99Seconds: percentile(ttft(main), 99),
    enginesPerSessionMean: mainEngines.reduce((a, b) => a + b, 0) / Math.max(1, mainEngines.length),
    enginesPerSessionMax: Math.max(0, ...mainEngines),
    enginesPerSessionWithSubagents: allEngines.reduce((a, b) => a + b, 0) / Math.max(1, allEngines.length),
    duringBurstRequests: duringBurst.length,
    duringBurstTtftP99Seconds: burstP99,
    duringBurstP99OverP50: burstP99 / mainP50,
    largestPromptTokens: Math.max(0, ...ok.map((r) => r.promptTokens)),
    busiestEngineShare: busiestShare(ok),
    recomputedPromptTokens: ok.reduce((n, r) => n + r.promptTokens - r.cachedTokens, 0),
  };
}

async function runCondition(
  options: StudyOptions,
  condition: Condition,
  configs: unknown[],
): Promise<{ records: CodingRecord[]; numbers: AgentsNumbers }> {
  const target: StudyTarget =
    options.gatewayUrl !== undefined
      ? externalTarget(options.gatewayUrl)
      : await StudyEnvironment.start({
          engines: ENGINES,
          config: { affinity: condition.affinity, health: STUDY_HEALTH, admission: { max_queue_size: 1024 } },
          timeScale: options.timeScale,
          seed: options.seed,
        });
  try {
    if (target instanceof StudyEnvironment) {
      configs.push(target.config);
      await target.warmConnections(ENGINES.length * MAX_INFLIGHT, "small");
    }
    const sessions = generateCodingWorkload(workloadSpec(options, `${options.runId}-${condition.name}`));
    const calls = sessions.reduce(
      (n, s) => n + s.calls.length + (s.burst?.subagents.reduce((m, a) => m + a.calls.length, 0) ?? 0),
      0,
    );
    options.progress.start(`agents:${condition.name}`, calls);
    const started = performance.now();
    const { records, bursts } = await runCodingSessions({
      condition: condition.name,
      sessions,
      target,
      sessionHeaders: condition.signal ? (id) => ({ [CLIENT_SESSION_HEADER]: id }) : () => ({}),
      startGapMs: 2000,
      now: () => performance.now() - started,
      onRecord: (r) => options.progress.tick(!r.ok),
    });
    options.progress.done();
    return { records, numbers: agentsNumbers(records, bursts, target.timeScale) };
  } finally {
    await target.close();
  }
}

export async function runAgentsStudy(options: StudyOptions): Promise<StudyResult> {
  const conditions =
    options.gatewayUrl === undefined ? CONDITIONS : [{ ...CONDITIONS[0]!, label: "the running gateway" }];
  const configs: unknown[] = [];
  const records: CodingRecord[] = [];
  const results: (AgentsNumbers & { name: string; label: string })[] = [];
  for (const condition of conditions) {
    const run = await runCondition(options, condition, configs);
    records.push(...run.records);
    results.push({ name: condition.name, label: condition.label, ...run.numbers });
  }
  const byName = new Map(results.map((r) => [r.name, r]));
  const signals = byName.get("client_signals");
  const checks: Check[] = results.map((r) => ({
    claim: `${r.name}: no failed request`,
    passed: r.failed === 0,
    detail: `${r.failed}/${r.requests}`,
  }));
  if (signals !== undefined) {
    checks.push({
      claim: "goal: client_signals: at least 90% of prompt tokens from the cache",
      passed: signals.prefixCacheHitRate >= 0.9,
      detail: pct(signals.prefixCacheHitRate),
    });
    checks.push({
      claim: "goal: client_signals: bursts keep the other sessions' TTFT p99 within 2x their p50",
      passed: signals.duringBurstRequests === 0 || signals.duringBurstP99OverP50 <= 2,
      detail:
        `${sec(signals.duringBurstTtftP99Seconds)} s over ${sec(signals.mainTtftP50Seconds)} s ` +
        `(${signals.duringBurstP99OverP50.toFixed(2)}x, ${signals.duringBurstRequests} calls during bursts)`,
    });
    for (const other of results.filter((r) => r !== signals)) {
      checks.push({
        claim: `goal: client_signals reuses more of the prompt than ${other.name}`,
        passed: signals.prefixCacheHitRate > other.prefixCacheHitRate,
        detail: `${pct(signals.prefixCacheHitRate)} vs ${pct(other.prefixCacheHitRate)}`,
      });
    }
  }
  const spec = workloadSpec(options, "");
  const verdict = agentsVerdict(results, checks);
  return {
    study: "agents",
    ...(verdict === undefined ? {} : { verdict }),
    title: "Coding agents: the client's session signal vs prefix placement vs least-loaded",
    description:
      `Four qwen2.5-7b engines (max_model_len ${MAX_MODEL_LEN}, max_inflight ${MAX_INFLIGHT}) in one tier; ` +
      `${spec.sessions} sessions of one coding agent (a shared ${spec.systemPromptChars.toLocaleString("en")}-character ` +
      `system prompt with tools), ${spec.turns.min}-${spec.turns.max} calls each, every call after the first ` +
      `adding a tool result of ${spec.toolResultChars.min.toLocaleString("en")}-${spec.toolResultChars.max.toLocaleString("en")} characters or a user turn; ` +
      `think times of ${spec.thinkSeconds.short.min}-${spec.thinkSeconds.short.max} s (${pct(spec.thinkSeconds.longShare)} of them ` +
      `${spec.thinkSeconds.long.min}-${spec.thinkSeconds.long.max} s); ${pct(spec.burstShare)} of the sessions fan out one burst ` +
      `of ${spec.burstSize.min}-${spec.burstSize.max} sub-agents (median ${spec.burstSize.median}) of ` +
      `${spec.subagentTurns.min}-${spec.subagentTurns.max} calls with their own system prompt and the parent's ` +
      `session signal (${CLIENT_SESSION_HEADER}); replies of exact length (ignore_eos). The same workload under each ` +
      "condition on fresh engines.",
    seed: options.seed,
    timeScale: options.timeScale,
    configs,
    records,
    tables: [
      {
        title: "Per condition (latencies in simulated seconds)",
        columns: [
          "condition",
          "requests (sub-agents)",
          "failed",
          "prompt tokens from cache",
          "own calls from cache",
          "prompt tokens recomputed",
          "TTFT p50 / p99",
          "own calls' TTFT p50 / p99",
          "engines per session (own / with sub-agents)",
          "busiest engine's calls",
          "others' TTFT p99 during bursts (x p50)",
          "largest prompt (tokens)",
        ],
        rows: results.map((r) => [
          r.label,
          `${r.requests} (${r.subagentRequests})`,
          r.failed,
          pct(r.prefixCacheHitRate),
          pct(r.mainPrefixCacheHitRate),
          count(r.recomputedPromptTokens),
          `${sec(r.ttftP50Seconds)} / ${sec(r.ttftP99Seconds)}`,
          `${sec(r.mainTtftP50Seconds)} / ${sec(r.mainTtftP99Seconds)}`,
          `${r.enginesPerSessionMean.toFixed(2)} (max ${r.enginesPerSessionMax}) / ${r.enginesPerSessionWithSubagents.toFixed(2)}`,
          pct(r.busiestEngineShare),
          `${sec(r.duringBurstTtftP99Seconds)} (${r.duringBurstP99OverP50.toFixed(2)}x, n=${r.duringBurstRequests})`,
          r.largestPromptTokens,
        ]),
      },
    ],
    charts: [
      {
        file: "agents-cache.svg",
        caption: "Prompt tokens served from the engines' prefix cache, per condition",
        svg: barChart({
          title: "KV reuse of coding-agent traffic",
          yLabel: "% of prompt tokens cached",
          series: ["all calls", "sessions' own calls"],
          groups: results.map((r) => ({
            label: r.label,
            values: [r.prefixCacheHitRate * 100, r.mainPrefixCacheHitRate * 100],
          })),
          yMax: 100,
        }),
      },
      {
        file: "agents-ttft.svg",
        caption: "TTFT p50 and p99 per condition (simulated seconds)",
        svg: barChart({
          title: "Time to first token",
          yLabel: "seconds (simulated)",
          series: ["TTFT p50", "TTFT p99", "others' p99 during bursts"],
          groups: results.map((r) => ({
            label: r.label,
            // No call during a burst is no bar ("-" in the table), not a p99 of 0.
            values: [r.ttftP50Seconds, r.ttftP99Seconds, r.duringBurstTtftP99Seconds],
          })),
          valueFormat: (v: number) => v.toFixed(2),
        }),
      },
    ],
    checks,
    notes:
      options.gatewayUrl === undefined
        ? []
        : [
            "Only the running gateway's own policy was measured (--gateway was given), with the client's signal.",
          ],
    data: Object.fromEntries(results.map((r) => [r.name, r])),
  };
}

/**
 * What the study found, whichever way it came out: how the client's own signal compares with the others in
 * prompt tokens recomputed (the same workload under every condition, so the same base), and which goals held.
 */
export function agentsVerdict(
  results: readonly (AgentsNumbers & { name: string; label: string })[],
  checks: readonly Check[],
): string | undefined {
  const signals = results.find((r) => r.name === "client_signals");
  if (signals === undefined) return undefined;
  const others = results.filter((r) => r !== signals);
  const comparisons = others.map((o) => {
    const saved = o.recomputedPromptTokens - signals.recomputedPromptTokens;
    const share =
      o.recomputedPromptTokens === 0 ? "" : ` (${pct(Math.abs(saved) / o.recomputedPromptTokens)})`;
    return saved >= 0
      ? `${count(saved)} fewer prompt tokens recomputed than ${o.label}${share}`
      : `${count(-saved)} MORE prompt tokens recomputed than ${o.label}${share}`;
  });
  const goals = checks.filter((c) => c.claim.startsWith("goal: "));
  const unmet = goals.filter((c) => !c.passed).length;
  const head =
    `The client's session signal served ${pct(signals.prefixCacheHitRate)} of prompt tokens from the cache` +
    (comparisons.length === 0 ? "" : `: ${comparisons.join("; ")}`) +
    ".";
  const tail =
    goals.length === 0
      ? ""
      : unmet === 0
        ? ` All ${goals.length} goals met.`
        : ` ${unmet} of ${goals.length} goals not met (see the checks).`;
  return head + tail;
}
