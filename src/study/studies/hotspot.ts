// Placement under hot spots: agent sessions (uniform, Zipf lengths with fanned-out hot sessions, mixed engines) under seven policies.
import { SeededRandom } from "../../core/random.js";
import { pct, sec } from "../analysis.js";
import { StudyEnvironment, externalTarget, type EngineSpec, type StudyTarget } from "../environment.js";
import { runHotSessions, type HotSessionPlan } from "../fanout-runner.js";
import { placementNumbers, reasonsText, type PlacementNumbers } from "../placement-numbers.js";
import {
  cacheChart,
  runPolicyMatrix,
  SESSION_POLICIES,
  STUDY_HEALTH,
  type StudyPolicy,
} from "../placement-policies.js";
import type { StudyOptions } from "../progress.js";
import type { Chart, Check, StudyResult, Table } from "../result.js";
import { runSessions, type RequestRecord } from "../session-runner.js";
import { barChart } from "../svg-charts.js";
import { generateWorkload, prose, type SessionPlan } from "../workload.js";

const MAX_INFLIGHT = 8;

const small = (i: number): EngineSpec => ({
  id: `small-${i}`,
  tier: "small",
  profile: "qwen2.5-7b",
  model: "Qwen/Qwen2.5-7B-Instruct",
  maxInflight: MAX_INFLIGHT,
});

const FOUR_7B: EngineSpec[] = [0, 1, 2, 3].map(small);

/** One 72B engine and three 7B ones in one tier, weighted by speed (the 72B steps about half as fast). */
const MIXED: EngineSpec[] = [
  {
    id: "big-0",
    tier: "small",
    profile: "qwen2.5-72b-fp8",
    model: "Qwen/Qwen2.5-72B-Instruct",
    maxInflight: MAX_INFLIGHT,
    weight: 0.5,
  },
  ...[1, 2, 3].map(small),
];

interface Workload {
  name: string;
  label: string;
  engines: EngineSpec[];
  ordinary: SessionPlan[];
  hot: HotSessionPlan[];
  /** Simulated ms between the ordinary sessions' starts (0: all at once). */
  startGapMs: number;
}

interface Sizes {
  sessions: number;
  maxTurns: number;
  hotSessions: number;
  rounds: number;
  fanout: number;
  hotTokens: number;
}

const FULL: Sizes = { sessions: 16, maxTurns: 12, hotSessions: 2, rounds: 3, fanout: 12, hotTokens: 256 };
const QUICK: Sizes = { sessions: 8, maxTurns: 4, hotSessions: 1, rounds: 1, fanout: 12, hotTokens: 96 };

/** Session lengths drawn from a Zipf law over 1..max (exponent 1.2): many short sessions, a few long ones. */
export function zipfLengths(seed: number, count: number, max: number, exponent = 1.2): number[] {
  const weights = Array.from({ length: max }, (_, k) => 1 / (k + 1) ** exponent);
  const total = weights.reduce((a, b) => a + b, 0);
  const random = new SeededRandom(seed);
  return Array.from({ length: count }, () => {
    let u = random.next() * total;
    for (let k = 0; k < max; k++) {
      u -= weights[k]!;
      if (u <= 0) return k + 1;
    }
    return max;
  });
}

function ordinarySessions(
  options: StudyOptions,
  sizes: Sizes,
  name: string,
  lengths?: number[],
): SessionPlan[] {
  const sessions = generateWorkload({
    seed: options.seed,
    sessions: sizes.sessions,
    turns: sizes.maxTurns,
    systemPromptChars: 2000,
    sharedSystemPrompt: false,
    userChars: 200,
    maxTokens: 64,
    toolCallRate: 0.3,
    toolResultChars: { min: 300, max: 1200 },
    thinkTimeMs: 500,
    // The same ids under every policy: the uniform workload compares decisions request by request.
    idPrefix: `${options.runId}-${name}`,
  });
  return lengths === undefined
    ? sessions.map((s) => ({ ...s, turns: s.turns.slice(0, Math.ceil(sizes.maxTurns / 2)) }))
    : sessions.map((s, i) => ({ ...s, turns: s.turns.slice(0, lengths[i]) }));
}

function hotSessions(options: StudyOptions, sizes: Sizes, name: string): HotSessionPlan[] {
  const random = new SeededRandom(options.seed + 7);
  return Array.from({ length: sizes.hotSessions }, (_, h) => ({
    id: `${options.runId}-${name}-hot-${h}`,
    systemPrompt: `You are an orchestrating agent that splits work into parallel subtasks.\n${prose(random, 2000)}`,
    rounds: Array.from({ length: sizes.rounds }, (_, r) => ({
      userMessage: `Round ${r + 1}: ${prose(random, 200)}`,
      calls: Array.from({ length: sizes.fanout }, (_, c) => `Subtask ${c + 1}: ${prose(random, 120)}`),
    })),
    maxTokens: sizes.hotTokens,
    thinkTimeMs: 1000,
  }));
}

function workloads(options: StudyOptions): Workload[] {
  const sizes = options.quick ? QUICK : FULL;
  const lengths = zipfLengths(options.seed, sizes.sessions, sizes.maxTurns);
  return [
    {
      name: "uniform",
      label: `uniform: ${sizes.sessions} sessions of ${Math.ceil(sizes.maxTurns / 2)} turns starting 0.3 s apart, 4 x 7B`,
      engines: FOUR_7B,
      ordinary: ordinarySessions(options, sizes, "uniform"),
      hot: [],
      startGapMs: 300,
    },
    {
      name: "hotspot",
      label:
        `hot spot: ${sizes.sessions} sessions of Zipf lengths (1-${sizes.maxTurns} turns) + ${sizes.hotSessions} hot ` +
        `session(s) fanning out ${sizes.fanout} calls x ${sizes.rounds} round(s), 4 x 7B`,
      engines: FOUR_7B,
      ordinary: ordinarySessions(options, sizes, "hotspot", lengths),
      hot: hotSessions(options, sizes, "hotspot"),
      startGapMs: 0,
    },
    {
      name: "mixed",
      label: "mixed engines: the hot-spot workload on one 72B (weight 0.5) and three 7B",
      engines: MIXED,
      ordinary: ordinarySessions(options, sizes, "mixed", lengths),
      hot: hotSessions(options, sizes, "mixed"),
      startGapMs: 0,
    },
  ];
}

interface ConditionResult extends PlacementNumbers {
  workload: string;
  policy: string;
  label: string;
  /** The ordinary sessions' requests only (those that share engines with the hot ones). */
  ordinaryTtftP99Seconds: number;
  spills: number;
  /** session#turn -> backend, for comparing decisions across policies. */
  decisions: Record<string, string>;
}

async function runCondition(
  options: StudyOptions,
  workload: Workload,
  policy: StudyPolicy,
  configs: unknown[],
): Promise<{ result: ConditionResult; records: RequestRecord[] }> {
  const target: StudyTarget =
    options.gatewayUrl !== undefined
      ? externalTarget(options.gatewayUrl)
      : await StudyEnvironment.start({
          engines: workload.engines,
          config: { affinity: policy.affinity, health: STUDY_HEALTH, admission: { max_queue_size: 1024 } },
          timeScale: options.timeScale,
          seed: options.seed,
        });
  if (target instanceof StudyEnvironment) configs.push(target.config);
  const condition = `${workload.name}:${policy.name}`;
  const total =
    workload.ordinary.reduce((n, s) => n + s.turns.length, 0) +
    workload.hot.reduce((n, s) => n + s.rounds.reduce((m, r) => m + r.calls.length, 0), 0);
  options.progress.start(condition, total);
  try {
    const started = performance.now();
    const now = (): number => performance.now() - started;
    const onRecord = (r: RequestRecord): void => options.progress.tick(!r.ok);
    const [ordinary, hot] = await Promise.all([
      runSessions({
        condition,
        sessions: workload.ordinary,
        concurrency: workload.ordinary.length,
        pool: target.pool,
        timeScale: target.timeScale,
        stream: true,
        tierHint: "small",
        sendSessionIds: policy.sendSessionIds,
        now,
        onRecord,
        startGapMs: workload.startGapMs,
      }),
      runHotSessions(condition, workload.hot, target, {
        sendSessionIds: policy.sendSessionIds,
        now,
        onRecord,
      }),
    ]);
    options.progress.done();
    const records = [...ordinary, ...hot];
    const numbers = placementNumbers(records, target.timeScale);
    const ordinaryNumbers = placementNumbers(ordinary, target.timeScale);
    return {
      records,
      result: {
        ...numbers,
        workload: workload.name,
        policy: policy.name,
        label: policy.label,
        ordinaryTtftP99Seconds: ordinaryNumbers.ttftP99Seconds,
        spills: numbers.reasons["spill"] ?? 0,
        decisions: Object.fromEntries(ordinary.map((r) => [`${r.sessionId}#${r.turn}`, r.backend ?? ""])),
      },
    };
  } finally {
    await target.close();
  }
}

function sameDecisions(a: ConditionResult, b: ConditionResult): { equal: number; total: number } {
  const keys = Object.keys(a.decisions);
  return { equal: keys.filter((k) => a.decisions[k] === b.decisions[k]).length, total: keys.length };
}

function tableFor(workload: Workload, results: ConditionResult[]): Table {
  return {
    title: `${workload.label} (latencies in simulated seconds)`,
    columns: [
      "policy",
      "requests",
      "failed",
      "TTFT p50",
      "TTFT p99",
      "TTFT p99 ordinary",
      "E2E p50",
      "E2E p99",
      "prefix-cache hit rate",
      "tokens/s",
      "placed by",
    ],
    rows: results.map((r) => [
      r.label,
      r.requests,
      r.failed,
      sec(r.ttftP50Seconds),
      sec(r.ttftP99Seconds),
      sec(r.ordinaryTtftP99Seconds),
      sec(r.e2eP50Seconds),
      sec(r.e2eP99Seconds),
      pct(r.prefixCacheHitRate),
      r.throughputTokensPerSecond.toFixed(0),
      reasonsText(r.reasons),
    ]),
  };
}

function goalChecks(name: string, results: ConditionResult[]): Check[] {
  const bounded = results.find((r) => r.policy === "bounded");
  const plain = results.find((r) => r.policy === "plain");
  if (bounded === undefined || plain === undefined) return [];
  const best = results.reduce((a, b) => (b.ttftP99Seconds < a.ttftP99Seconds ? b : a));
  const gapPoints = (plain.prefixCacheHitRate - bounded.prefixCacheHitRate) * 100;
  return [
    {
      claim: `goal: ${name}: bounded-load affinity has the best TTFT p99 of all policies`,
      passed: best.policy === "bounded",
      detail:
        `bounded ${sec(bounded.ttftP99Seconds)} s; best ${best.policy} ${sec(best.ttftP99Seconds)} s; ` +
        results.map((r) => `${r.policy} ${sec(r.ttftP99Seconds)}`).join(", "),
    },
    {
      claim: `goal: ${name}: bounded-load affinity's prefix-cache hit rate within 3 points of plain affinity`,
      passed: gapPoints <= 3,
      detail: `${pct(bounded.prefixCacheHitRate)} vs ${pct(plain.prefixCacheHitRate)} (${gapPoints.toFixed(1)} points)`,
    },
  ];
}

export async function runHotspotStudy(options: StudyOptions): Promise<StudyResult> {
  const policies =
    options.gatewayUrl === undefined
      ? SESSION_POLICIES
      : [{ ...SESSION_POLICIES[3]!, label: "the running gateway's policy" }];
  const configs: unknown[] = [];
  const loads = workloads(options);
  const { byWorkload, records, checks } = await runPolicyMatrix(loads, policies, (workload, policy) =>
    runCondition(options, workload, policy, configs),
  );
  const all = [...byWorkload.values()].flat();
  const uniform = byWorkload.get("uniform") ?? [];
  const uPlain = uniform.find((r) => r.policy === "plain");
  const uBounded = uniform.find((r) => r.policy === "bounded");
  if (uPlain && uBounded) {
    const { equal, total } = sameDecisions(uBounded, uPlain);
    const hits = (r: ConditionResult): number => r.reasons["affinity_hit"] ?? 0;
    const fresh = (r: ConditionResult): number => r.reasons["new_session"] ?? 0;
    checks.push({
      claim:
        "uniform: bounded-load affinity keeps the seed's semantics: the same hits and new sessions as plain affinity, no spill",
      passed: hits(uBounded) === hits(uPlain) && fresh(uBounded) === fresh(uPlain) && uBounded.spills === 0,
      detail:
        `hits ${hits(uBounded)} vs ${hits(uPlain)}, new sessions ${fresh(uBounded)} vs ${fresh(uPlain)}, ` +
        `${uBounded.spills} spills`,
    });
    checks.push({
      claim:
        "goal: uniform: bounded-load affinity decides exactly as plain affinity (same backend for every request)",
      passed: equal === total && total > 0,
      detail: `${equal}/${total} requests on the same backend`,
    });
  }
  checks.push(...goalChecks("hotspot", byWorkload.get("hotspot") ?? []));
  checks.push(...goalChecks("mixed", byWorkload.get("mixed") ?? []));

  const tables = loads.map((w) => tableFor(w, byWorkload.get(w.name) ?? []));
  const charts: Chart[] = loads.map((w) => ({
    file: `hotspot-${w.name}-ttft.svg`,
    caption: `TTFT p50 and p99 per policy, ${w.name} workload (simulated seconds)`,
    svg: barChart({
      title: `TTFT per policy: ${w.name}`,
      yLabel: "seconds (simulated)",
      series: ["TTFT p50", "TTFT p99", "TTFT p99 ordinary"],
      groups: (byWorkload.get(w.name) ?? []).map((r) => ({
        label: r.policy,
        values: [r.ttftP50Seconds, r.ttftP99Seconds, r.ordinaryTtftP99Seconds],
      })),
      valueFormat: (v: number) => v.toFixed(2),
    }),
  }));
  charts.push(cacheChart("hotspot-cache.svg", loads, policies, byWorkload));

  return {
    study: "hotspot",
    title:
      "Placement under hot spots: bounded-load affinity against the balancers and two cache-aware routers",
    description:
      `Simulated engines at max_inflight ${MAX_INFLIGHT} behind the gateway, a fresh deployment per condition, the ` +
      "same sessions (same ids, prompts and order) under every policy. Ordinary sessions: their own " +
      "2,000-character system prompt, 200-character user turns, a tool round on 30% of turns, 0.5 s of think " +
      "time, streamed replies of up to 64 tokens. Hot sessions: after each planning message, parallel calls of " +
      "up to " +
      `${(options.quick ? QUICK : FULL).hotTokens} tokens each, 1 s between rounds. Policies: ` +
      policies.map((p) => p.label).join("; ") +
      ". TTFT p99 ordinary: the ordinary sessions' requests alone.",
    seed: options.seed,
    timeScale: options.timeScale,
    configs,
    records,
    tables,
    charts,
    checks,
    notes: [
      "Latencies are simulated seconds (wall time x time scale): event-loop delays of the study process are " +
        "multiplied by the time scale too, so compare policies within one run.",
      "prefix placement sends no X-Session-Id: each turn is placed by its prompt's leading part (here each " +
        "session's own system prompt), within the load bound, with nothing bound.",
      ...(options.gatewayUrl === undefined
        ? []
        : ["Only the running gateway's policy was measured (--gateway)."]),
    ],
    data: Object.fromEntries(all.map((r) => [`${r.workload}:${r.policy}`, { ...r, decisions: undefined }])),
  };
}
