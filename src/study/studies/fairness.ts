// Program-aware scheduling when engines are full: interactive agents beside batch agents' sub-agent bursts, under
// the flow scheduler's policies (fifo, fair, least-attained) and unloaded.
import { pct, sec, simSeconds } from "../analysis.js";
import { StudyEnvironment, externalTarget, type EngineSpec, type StudyTarget } from "../environment.js";
import {
  runFairnessTraffic,
  type FairnessRecord,
  type FairnessRun,
  type FairnessSpec,
} from "../fairness-runner.js";
import { STUDY_HEALTH } from "../placement-policies.js";
import type { StudyOptions } from "../progress.js";
import type { Check, StudyResult } from "../result.js";
import { percentile, ratio } from "../stats.js";
import { barChart } from "../svg-charts.js";
import { jainIndex } from "../../metrics/jain-index.js";
import { metricValue, scrapeMetrics } from "../../metrics/prometheus-text.js";
import type { FlowPolicyName } from "../../admission/flow-queue/types.js";

interface Condition {
  name: string;
  label: string;
  /** undefined: the interactive agents alone. */
  policy: FlowPolicyName | undefined;
  /** admission.max_inflight_per_agent (default none). */
  maxInflightPerAgent?: number;
}

const CONDITIONS: Condition[] = [
  { name: "unloaded", label: "interactive agents alone", policy: undefined },
  { name: "fifo", label: "fifo (first come, first served)", policy: "fifo" },
  { name: "fair", label: "fair (round-robin between agents)", policy: "fair" },
  { name: "least-attained", label: "least-attained (the default)", policy: "least-attained" },
  {
    name: "least-attained-cap",
    label: "least-attained, max_inflight_per_agent 3",
    policy: "least-attained",
    maxInflightPerAgent: 3,
  },
];

const MAX_INFLIGHT = 4;

const ENGINES: EngineSpec[] = [0, 1].map((i) => ({
  id: `small-${i}`,
  tier: "small",
  profile: "qwen2.5-7b",
  model: "Qwen/Qwen2.5-7B-Instruct",
  maxInflight: MAX_INFLIGHT,
}));

export function fairnessSpec(options: StudyOptions, idPrefix: string): FairnessSpec {
  const quick = options.quick;
  return {
    seed: options.seed,
    idPrefix,
    interactiveAgents: quick ? 2 : 4,
    tasks: quick ? 1 : 3,
    turnsPerTask: quick ? 2 : 4,
    thinkSeconds: { min: 1, max: 4 },
    interactivePromptChars: quick ? 1_000 : 4_000,
    interactiveReplyTokens: quick ? 8 : 60,
    batchAgents: 2,
    burstSize: quick ? 4 : 12,
    batchPromptChars: quick ? 1_000 : 6_000,
    batchReplyTokens: quick ? 16 : 200,
    batchLeadSeconds: quick ? 1 : 8,
  };
}

export interface FairnessNumbers {
  requests: number;
  failed: number;
  interactiveTtftP50Seconds: number;
  interactiveTtftP99Seconds: number;
  programP50Seconds: number;
  programP95Seconds: number;
  /** Interactive calls' waits at the gateway for a slot (x_agent_serve.queue_wait_ms), p95. */
  interactiveQueueP95Seconds: number;
  /**
   * Generated tokens per simulated second of the window (until the last interactive task ended): the engines'
   * own counters when readable, else the calls finished in the window. Batch: the total less the interactive
   * calls' (all of which end in the window).
   */
  batchTokensPerSecond: number;
  totalTokensPerSecond: number;
  /** Jain's index over the agents' generated tokens in the window (1: equal shares). */
  jain: number;
}

export function fairnessNumbers(run: FairnessRun, timeScale: number): FairnessNumbers {
  const ok = run.records.filter((r) => r.status === 200 && r.ok);
  const interactive = ok.filter((r) => r.kind === "interactive");
  const inWindow = ok.filter((r) => r.startMs >= run.windowStartMs && r.startMs + r.e2eMs <= run.windowEndMs);
  const windowSeconds = simSeconds(run.windowEndMs - run.windowStartMs, timeScale);
  const tokens = (list: readonly FairnessRecord[]): number =>
    list.reduce((n, r) => n + r.completionTokens, 0);
  const interactiveTokens = tokens(interactive);
  const total = run.windowTokens ?? tokens(inWindow);
  const perAgent = new Map<string, number>();
  for (const r of inWindow) perAgent.set(r.agent, (perAgent.get(r.agent) ?? 0) + r.completionTokens);
  const ttft = interactive.flatMap((r) => (r.ttftMs === null ? [] : [simSeconds(r.ttftMs, timeScale)]));
  const programs = run.programs.map((p) => simSeconds(p.endMs - p.startMs, timeScale));
  return {
    requests: run.records.length,
    failed: run.records.length - ok.length,
    interactiveTtftP50Seconds: percentile(ttft, 50),
    interactiveTtftP99Seconds: percentile(ttft, 99),
    programP50Seconds: percentile(programs, 50),
    programP95Seconds: percentile(programs, 95),
    interactiveQueueP95Seconds: percentile(
      interactive.map((r) => simSeconds(r.queueWaitMs ?? 0, timeScale)),
      95,
    ),
    batchTokensPerSecond: ratio(Math.max(0, total - interactiveTokens), windowSeconds),
    totalTokensPerSecond: ratio(total, windowSeconds),
    jain: jainIndex([...perAgent.values()]),
  };
}

/** Tokens the study's engines generated so far, by their own counters. */
async function generatedTokens(environment: StudyEnvironment): Promise<number> {
  const texts = await Promise.all([...environment.engines.values()].map((e) => scrapeMetrics(e.url)));
  return texts.reduce((n, text) => n + metricValue(text, "vllm:generation_tokens_total"), 0);
}

async function runCondition(
  options: StudyOptions,
  condition: Condition,
  configs: unknown[],
): Promise<{ run: FairnessRun; numbers: FairnessNumbers }> {
  const target: StudyTarget =
    options.gatewayUrl !== undefined
      ? externalTarget(options.gatewayUrl)
      : await StudyEnvironment.start({
          engines: ENGINES,
          config: {
            health: STUDY_HEALTH,
            // Bursts must wait, never be refused: the study compares who waits, not who is turned away.
            admission: {
              max_queue_size: 4096,
              // Budgets are not what is studied: no agent runs out within a run.
              default_token_budget: 1_000_000_000,
              queue_timeout_seconds: 3600,
              scheduling: { policy: condition.policy ?? "fifo" },
              max_inflight_per_agent: condition.maxInflightPerAgent ?? 0,
            },
          },
          timeScale: options.timeScale,
          seed: options.seed,
        });
  try {
    if (target instanceof StudyEnvironment) {
      configs.push(target.config);
      await target.warmConnections(ENGINES.length * MAX_INFLIGHT, "small");
    }
    const spec = fairnessSpec(options, `${options.runId}-${condition.name}`);
    options.progress.start(
      `fairness:${condition.name}`,
      spec.interactiveAgents * spec.tasks * spec.turnsPerTask,
    );
    const started = performance.now();
    const run = await runFairnessTraffic({
      spec,
      condition: condition.name,
      target,
      batch: condition.policy !== undefined,
      now: () => performance.now() - started,
      onRecord: (r) => {
        if (r.kind === "interactive") options.progress.tick(!r.ok);
      },
      ...(target instanceof StudyEnvironment ? { engineTokens: () => generatedTokens(target) } : {}),
    });
    options.progress.done();
    return { run, numbers: fairnessNumbers(run, target.timeScale) };
  } finally {
    await target.close();
  }
}

export async function runFairnessStudy(options: StudyOptions): Promise<StudyResult> {
  const conditions =
    options.gatewayUrl === undefined
      ? CONDITIONS
      : [CONDITIONS[0]!, { name: "gateway", label: "the running gateway's policy", policy: "fifo" as const }];
  const configs: unknown[] = [];
  const records: FairnessRecord[] = [];
  const results: (FairnessNumbers & { name: string; label: string })[] = [];
  for (const condition of conditions) {
    const { run, numbers } = await runCondition(options, condition, configs);
    records.push(...run.records);
    results.push({ name: condition.name, label: condition.label, ...numbers });
  }
  const byName = new Map(results.map((r) => [r.name, r]));
  const unloaded = byName.get("unloaded")!;
  const fifo = byName.get("fifo");
  const slowdown = (r: FairnessNumbers): number => r.programP95Seconds / unloaded.programP95Seconds;
  const throughputVsFifo = (r: FairnessNumbers): number =>
    fifo === undefined ? Number.NaN : r.totalTokensPerSecond / fifo.totalTokensPerSecond;
  const checks: Check[] = results.map((r) => ({
    claim: `${r.name}: no failed request`,
    passed: r.failed === 0,
    detail: `${r.failed}/${r.requests}`,
  }));
  // FIFO is the baseline the goals are measured against: its numbers are in the table, not checked.
  for (const r of results.filter((x) => x.name !== "unloaded" && x !== fifo)) {
    checks.push({
      claim: `goal: ${r.name}: interactive program latency p95 within 1.5x of unloaded`,
      passed: slowdown(r) <= 1.5,
      detail: `${sec(r.programP95Seconds)} s vs ${sec(unloaded.programP95Seconds)} s (${slowdown(r).toFixed(2)}x)`,
    });
    if (fifo !== undefined) {
      checks.push({
        claim: `goal: ${r.name}: total throughput within 5% of fifo's`,
        passed: throughputVsFifo(r) >= 0.95,
        detail: `${r.totalTokensPerSecond.toFixed(1)} vs ${fifo.totalTokensPerSecond.toFixed(1)} tokens/s (${pct(throughputVsFifo(r))})`,
      });
    }
  }
  const spec = fairnessSpec(options, "");
  return {
    study: "fairness",
    title: "Program-aware scheduling: interactive agents beside sub-agent bursts, per flow policy",
    description:
      `Two qwen2.5-7b engines of max_inflight ${MAX_INFLIGHT} in one tier. ${spec.interactiveAgents} interactive agents ` +
      `(X-Agent-Id interactive-N) each work through ${spec.tasks} task(s) of ${spec.turnsPerTask} streamed calls, one at a ` +
      `time, with ${spec.thinkSeconds.min}-${spec.thinkSeconds.max} s think times and ${spec.interactiveReplyTokens}-token ` +
      `replies; beside them ${spec.batchAgents} batch agents (batch-N) fire bursts of ${spec.burstSize} sub-agent calls ` +
      `(${spec.batchReplyTokens}-token replies), the next burst as soon as one ends, so the engines stay full and ` +
      "requests wait at the gateway. Program latency is a task's time from its first call to its last reply, think " +
      `times included; 'unloaded' runs the interactive agents alone; the last condition adds admission.max_inflight_per_agent 3. The batch agents start ${spec.batchLeadSeconds} s ahead; throughput counts the tokens the engines generated (their ` +
      "vllm:generation_tokens_total) from the interactive agents' start until their last task ended, per simulated second; " +
      "batch throughput is that less the interactive calls' tokens. Replies of exact length (ignore_eos); " +
      "fresh engines and gateway per condition.",
    seed: options.seed,
    timeScale: options.timeScale,
    configs,
    records,
    tables: [
      {
        title: "Per condition (latencies in simulated seconds)",
        columns: [
          "condition",
          "requests (failed)",
          "interactive TTFT p50 / p99",
          "interactive wait p95",
          "program latency p50 / p95",
          "p95 vs unloaded",
          "batch tokens/s",
          "total tokens/s (vs fifo)",
          "Jain index",
        ],
        rows: results.map((r) => [
          r.label,
          `${r.requests} (${r.failed})`,
          `${sec(r.interactiveTtftP50Seconds)} / ${sec(r.interactiveTtftP99Seconds)}`,
          sec(r.interactiveQueueP95Seconds),
          `${sec(r.programP50Seconds)} / ${sec(r.programP95Seconds)}`,
          `${slowdown(r).toFixed(2)}x`,
          r.name === "unloaded" ? "-" : r.batchTokensPerSecond.toFixed(1),
          r.name === "unloaded" || fifo === undefined
            ? r.totalTokensPerSecond.toFixed(1)
            : `${r.totalTokensPerSecond.toFixed(1)} (${pct(throughputVsFifo(r))})`,
          r.jain.toFixed(3),
        ]),
      },
    ],
    charts: [
      {
        file: "fairness-program-latency.svg",
        caption: "Interactive program latency p50 and p95 per condition (simulated seconds)",
        svg: barChart({
          title: "Interactive task latency",
          yLabel: "seconds (simulated)",
          series: ["p50", "p95"],
          groups: results.map((r) => ({
            label: r.label,
            values: [r.programP50Seconds, r.programP95Seconds],
          })),
          valueFormat: (v: number) => v.toFixed(1),
        }),
      },
    ],
    checks,
    notes:
      options.gatewayUrl === undefined
        ? []
        : [
            "--gateway was given: only the running gateway's own policy was measured, beside the unloaded run.",
          ],
    data: Object.fromEntries(results.map((r) => [r.name, r])),
  };
}
