// KV events under KV pressure (issue 32, part 4): coding-agent sessions of 100-200k tokens with sub-agent bursts,
// on engines whose caches hold a few of them, placed by today's approximate rules (bindings, rendezvous, load
// bound) vs by what the engines' KV events say they hold, behind one and three gateway replicas.
import { BalancedPool, Pool, type Dispatcher } from "undici";
import { GatewayError } from "../../core/errors.js";
import { count, pct, sec } from "../analysis.js";
import { runCodingSessions, type CodingRecord } from "../coding-runner.js";
import {
  generateCodingWorkload,
  type CodingSessionPlan,
  type CodingWorkloadSpec,
} from "../coding-workload.js";
import { warmConnections } from "../environment.js";
import { GatewayFleet } from "../gateway-fleet.js";
import { InterruptGuard } from "../interrupt-guard.js";
import { kvStudyNumbers, PREDICTION_TOLERANCE, type KvStudyNumbers } from "../kv-events-numbers.js";
import { STUDY_HEALTH } from "../placement-policies.js";
import type { StudyOptions } from "../progress.js";
import type { Check, StudyResult } from "../result.js";
import { barChart } from "../svg-charts.js";
import { CLIENT_SESSION_HEADER } from "./agents.js";
import { getProfile, startSimEngine, type SimEngineHandle } from "../../sim/index.js";
import { parseKvEventsConfig } from "../../sim/kv-events-config.js";
import {
  findRedisServer,
  REDIS_SERVER_MISSING,
  startRedisServer,
  type RedisServer,
} from "../../store/redis-server.js";

export type Pressure = "roomy" | "tight";
export type Placement = "approximate" | "events";
/** Where 3 replicas keep bindings: each its own (memory), or one Redis, which also shares their sends' pending blocks. */
export type Store = "memory" | "redis";

export interface KvCondition {
  name: string;
  pressure: Pressure;
  replicas: 1 | 3;
  placement: Placement;
  store: Store;
}

const PROFILE = "qwen2.5-7b";
const MODEL = "Qwen/Qwen2.5-7B-Instruct";
const TIER = "small";
const ENGINES = 4;
/** Per engine and replica: sub-agent bursts fill the engines and make sessions spill. */
const MAX_INFLIGHT = 8;
/** A long-context engine (Qwen2.5-7B-Instruct-1M served with --max-model-len 262144): prompts reach 200k. */
const MAX_MODEL_LEN = 262_144;
const TOPIC = "kv-events";
/**
 * affinity.store.timeout_ms with Redis: three gateways, four engines, the client and redis-server share the
 * machine, where a process descheduled for the default 50 ms is common (the replicas study's reasoning).
 */
const STORE_TIMEOUT_MS = 200;

interface Plan {
  workload: Omit<CodingWorkloadSpec, "seed" | "idPrefix">;
  /** Each engine's KV cache in blocks of 16 tokens, per pressure. */
  kvCapacityBlocks: Record<Pressure, number>;
  pressures: readonly Pressure[];
}

/**
 * Full: eight sessions that start at about 100k tokens (a 20k-token system prompt with tools and the files a
 * resumed task has read) and grow by 4-12k tokens of tool results per call to 150-200k; half fan out a
 * burst of sub-agents. Roomy engines keep the KV an A100 80GB leaves a 7B model (the profile's ~1M tokens, five
 * of these sessions); tight ones a quarter of it (~260k tokens, one session and a half), as a larger model's
 * would be.
 */
const FULL: Plan = {
  workload: {
    sessions: 8,
    turns: { min: 6, max: 10 },
    systemPromptChars: 80_000,
    subagentPromptChars: 24_000,
    openingContextChars: { min: 300_000, max: 360_000 },
    toolResultChars: { min: 16_000, max: 48_000 },
    replyTokens: { min: 40, max: 240 },
    burstShare: 0.5,
    burstSize: { median: 7, p90: 20, min: 4, max: 24 },
    subagentTurns: { min: 2, max: 4 },
    thinkSeconds: { short: { min: 1, max: 8 }, long: { min: 20, max: 60 }, longShare: 0.1 },
    subagentThinkSeconds: { min: 1, max: 5 },
  },
  kvCapacityBlocks: { roomy: getProfile(PROFILE).kvCapacityBlocks, tight: 16_384 },
  pressures: ["roomy", "tight"],
};

/** Quick (tests): the same shape a tenth the size, tight engines only. */
const QUICK: Plan = {
  workload: {
    sessions: 4,
    turns: { min: 3, max: 4 },
    systemPromptChars: 8_000,
    subagentPromptChars: 2_400,
    openingContextChars: { min: 30_000, max: 36_000 },
    toolResultChars: { min: 1_600, max: 4_800 },
    replyTokens: { min: 8, max: 24 },
    burstShare: 0.5,
    burstSize: { median: 4, p90: 4, min: 4, max: 4 },
    subagentTurns: { min: 2, max: 2 },
    thinkSeconds: { short: { min: 1, max: 4 }, long: { min: 5, max: 10 }, longShare: 0 },
    subagentThinkSeconds: { min: 1, max: 3 },
  },
  kvCapacityBlocks: { roomy: 16_384, tight: 2_048 },
  pressures: ["tight"],
};

/**
 * Per pressure: approximate and event-driven placement behind 1 and 3 replicas with no shared state, then
 * event-driven behind 3 replicas sharing a Redis (bindings, and each replica's sends: docs/kv-events.md).
 */
export function conditionsOf(plan: Plan): KvCondition[] {
  const conditions: KvCondition[] = [];
  for (const pressure of plan.pressures) {
    for (const replicas of [1, 3] as const)
      for (const placement of ["approximate", "events"] as const)
        conditions.push({
          name: `${pressure}-r${replicas}-${placement}`,
          pressure,
          replicas,
          placement,
          store: "memory",
        });
    conditions.push({
      name: `${pressure}-r3-events-redis`,
      pressure,
      replicas: 3,
      placement: "events",
      store: "redis",
    });
  }
  return conditions;
}

/** All of a plan's conditions, or only those `names` lists (in the plan's order); an unknown name is a usage error. */
export function selectConditions(
  all: readonly KvCondition[],
  names: readonly string[] | undefined,
): readonly KvCondition[] {
  if (names === undefined) return all;
  const unknown = names.filter((n) => !all.some((c) => c.name === n));
  if (unknown.length > 0 || names.length === 0)
    throw new GatewayError(
      "usage_error",
      `unknown kvevents condition(s) ${unknown.join(", ") || "(none given)"}; this plan's: ${all.map((c) => c.name).join(", ")}`,
    );
  return all.filter((c) => names.includes(c.name));
}

function label(c: KvCondition): string {
  return (
    `${c.pressure}, ${c.replicas} replica${c.replicas === 1 ? "" : "s"}, ${c.placement}` +
    (c.store === "redis" ? " (shared Redis)" : "")
  );
}

async function startEngines(plan: Plan, c: KvCondition, options: StudyOptions): Promise<SimEngineHandle[]> {
  // Every engine publishes events in every condition (the same engines); only the gateway's config differs.
  const events = parseKvEventsConfig(
    JSON.stringify({
      enable_kv_cache_events: true,
      endpoint: "tcp://127.0.0.1:0",
      replay_endpoint: "tcp://127.0.0.1:0",
      topic: TOPIC,
    }),
  );
  const engines: SimEngineHandle[] = [];
  try {
    for (let i = 0; i < ENGINES; i++)
      engines.push(
        await startSimEngine({
          profile: PROFILE,
          model: MODEL,
          timeScale: options.timeScale,
          seed: options.seed + i,
          maxModelLen: MAX_MODEL_LEN,
          kvCapacityBlocks: plan.kvCapacityBlocks[c.pressure],
          kvEvents: { config: events! },
        }),
      );
    return engines;
  } catch (err) {
    await Promise.all(engines.map((e) => e.close()));
    throw err;
  }
}

export function gatewayConfig(
  c: KvCondition,
  engines: readonly SimEngineHandle[],
  kvCapacityBlocks: number,
  redisUrl?: string,
): Record<string, unknown> {
  if (c.store === "redis" && redisUrl === undefined)
    throw new GatewayError("usage_error", `${c.name} needs a redis-server's URL`);
  return {
    server: { host: "127.0.0.1", port: 0 },
    ...(c.store === "redis"
      ? {
          affinity: {
            store: {
              kind: "redis",
              url: redisUrl,
              timeout_ms: STORE_TIMEOUT_MS,
              key_prefix: `kvevents-${c.name}:`,
            },
          },
        }
      : {}),
    health: STUDY_HEALTH,
    // Calls wait for a slot as long as a burst needs: a study measures placement, not the queue's timeout.
    admission: { max_queue_size: 1024, queue_timeout_seconds: 600 },
    backends: engines.map((engine, i) => ({
      id: `engine-${i}`,
      tier: TIER,
      base_url: engine.url,
      model: MODEL,
      max_inflight: MAX_INFLIGHT,
      ...(c.placement === "events"
        ? {
            kv_events: {
              endpoint: engine.kvEvents!.endpoint,
              replay_endpoint: engine.kvEvents!.replayEndpoint,
              topic: TOPIC,
              max_blocks: kvCapacityBlocks,
            },
          }
        : {}),
    })),
  };
}

/**
 * The seed's sessions, with ids from the seed alone: the gateway hashes a session id to rank engines (rendezvous:
 * where approximate placement binds a session that names itself, and event-driven placement's tie-break), so ids
 * carrying the run's timestamp placed every run of a seed differently. The same ids in every condition: the pairs
 * compare placements of the same sessions. Conditions never share a gateway or a Redis key prefix, so the ids
 * need not differ between them.
 */
export function kvSessions(
  workload: Omit<CodingWorkloadSpec, "seed" | "idPrefix">,
  seed: number,
): CodingSessionPlan[] {
  return generateCodingWorkload({ ...workload, seed, idPrefix: `kvevents-s${seed}` });
}

async function runCondition(
  plan: Plan,
  c: KvCondition,
  options: StudyOptions,
  guard: InterruptGuard,
  redisUrl: string | undefined,
): Promise<{ records: CodingRecord[]; config: unknown }> {
  const engines = await startEngines(plan, c, options);
  let fleet: GatewayFleet | undefined;
  let pool: Dispatcher | undefined;
  try {
    fleet = await GatewayFleet.start(
      gatewayConfig(c, engines, plan.kvCapacityBlocks[c.pressure], redisUrl),
      c.replicas,
      guard,
    );
    // Every call to the next replica, as a Service spreading requests would: a session's calls meet them all.
    pool =
      c.replicas === 1
        ? new Pool(fleet.url(0), { connections: 256, pipelining: 1 })
        : new BalancedPool(fleet.urls, { connections: 128, pipelining: 1 });
    await warmConnections(pool, ENGINES * MAX_INFLIGHT, TIER);
    const sessions = kvSessions(plan.workload, options.seed);
    const calls = sessions.reduce(
      (n, s) => n + s.calls.length + (s.burst?.subagents.reduce((m, a) => m + a.calls.length, 0) ?? 0),
      0,
    );
    options.progress.start(`kvevents:${c.name}`, calls);
    const started = performance.now();
    const target = { pool, timeScale: options.timeScale };
    const { records } = await runCodingSessions({
      condition: c.name,
      sessions,
      target,
      sessionHeaders: (id): Record<string, string> =>
        sendsSignal(id) ? { [CLIENT_SESSION_HEADER]: id } : {},
      startGapMs: 2000,
      now: () => performance.now() - started,
      onRecord: (r) => options.progress.tick(!r.ok),
    });
    options.progress.done();
    return { records, config: fleet.config };
  } finally {
    await pool?.close();
    await fleet?.close();
    await Promise.all(engines.map((e) => e.close()));
  }
}

/**
 * Every other session comes from a client that names its session (Claude Code's header); the rest from one that
 * does not (an agent on a plain SDK), placed by its prompt alone: approximate placement by the shared prefix's
 * home, event-driven by where its conversation is held.
 */
export function sendsSignal(sessionId: string): boolean {
  return Number(sessionId.slice(sessionId.lastIndexOf("-") + 1)) % 2 === 0;
}

/** One condition's numbers, all calls and by client (summary.json's data). */
export type Row = KvStudyNumbers & KvCondition & { signalled: KvStudyNumbers; unsignalled: KvStudyNumbers };

/** The approximate and event-driven rows of one (pressure, replicas) pair. */
function pairs(rows: readonly Row[]): { approximate: Row; events: Row }[] {
  const out: { approximate: Row; events: Row }[] = [];
  for (const events of rows.filter((r) => r.placement === "events")) {
    // Approximate placement shares nothing through Redis but bindings (each replica computes the same
    // rendezvous ranking): the shared-Redis events row is set against the same approximate row.
    const approximate = rows.find(
      (r) =>
        r.placement === "approximate" && r.pressure === events.pressure && r.replicas === events.replicas,
    );
    if (approximate !== undefined) out.push({ approximate, events });
  }
  return out;
}

function pairName(r: Row): string {
  return (
    `${r.pressure}, ${r.replicas} replica${r.replicas === 1 ? "" : "s"}` +
    (r.store === "redis" ? ", shared Redis" : "")
  );
}

export function kvEventsChecks(rows: readonly Row[]): Check[] {
  const checks: Check[] = rows.map((r) => ({
    claim: `${r.name}: no failed request`,
    passed: r.failed === 0,
    detail: `${r.failed}/${r.requests}`,
  }));
  for (const r of rows.filter((row) => row.placement === "events")) {
    checks.push({
      claim: `goal: ${r.name}: the prediction within ${pct(PREDICTION_TOLERANCE)} of the prompt on at least 99% of calls`,
      passed:
        r.predictedTurns > 0 &&
        r.predictedTurns === r.requests - r.failed &&
        r.predictionWithinTolerance >= 0.99,
      detail: `${pct(r.predictionWithinTolerance)} of ${r.predictedTurns} calls with a prediction (of ${r.requests - r.failed} served); mean error ${pct(r.predictionErrorMean)}, largest ${pct(r.predictionErrorMax)}`,
    });
  }
  for (const { approximate, events } of pairs(rows)) {
    checks.push({
      claim: `goal: ${pairName(events)}: event-driven placement reuses at least as much of the prompt as approximate`,
      passed: events.cachedShare >= approximate.cachedShare,
      detail: `${pct(events.cachedShare)} vs ${pct(approximate.cachedShare)}`,
    });
    if (events.pressure === "tight")
      checks.push({
        claim: `goal: ${pairName(events)}: under pressure, event-driven placement recomputes fewer prompt tokens`,
        passed: events.recomputedTokens < approximate.recomputedTokens,
        detail: `${count(events.recomputedTokens)} vs ${count(approximate.recomputedTokens)}`,
      });
  }
  return checks;
}

/** What the study found, whichever way it came out: per pair, what events changed. */
export function kvEventsVerdict(rows: readonly Row[], checks: readonly Check[]): string {
  const parts = pairs(rows).map(({ approximate: a, events: e }) => {
    const saved = a.recomputedTokens - e.recomputedTokens;
    const share = a.recomputedTokens === 0 ? "" : ` (${pct(Math.abs(saved) / a.recomputedTokens)})`;
    return (
      `${pairName(e)}: ${pct(e.cachedShare)} of prompt tokens cached vs ${pct(a.cachedShare)}, ` +
      `${saved >= 0 ? `${count(saved)} fewer` : `${count(-saved)} MORE`} tokens recomputed${share}, ` +
      `TTFT p50 ${sec(e.ttftP50Seconds)} vs ${sec(a.ttftP50Seconds)} s, p99 ${sec(e.ttftP99Seconds)} vs ${sec(a.ttftP99Seconds)} s`
    );
  });
  const goals = checks.filter((c) => c.claim.startsWith("goal: "));
  const unmet = goals.filter((c) => !c.passed).length;
  // --conditions may leave no pair: then the verdict says so rather than comparing nothing.
  const compared =
    parts.length === 0
      ? "No approximate and event-driven pair ran (--conditions)."
      : `Event-driven vs approximate placement: ${parts.join("; ")}.`;
  return (
    compared +
    (goals.length === 0
      ? ""
      : unmet === 0
        ? ` All ${goals.length} goals met.`
        : ` ${unmet} of ${goals.length} goals not met (see the checks).`)
  );
}

function reasonsText(reasons: Record<string, number>): string {
  return Object.entries(reasons)
    .sort((a, b) => b[1] - a[1])
    .map(([reason, n]) => `${reason} ${n}`)
    .join(", ");
}

export async function runKvEventsStudy(options: StudyOptions): Promise<StudyResult> {
  if (options.gatewayUrl !== undefined)
    throw new GatewayError(
      "usage_error",
      "the kvevents study starts its own engines and gateway replicas in each condition: drop --gateway",
    );
  const redisPath = findRedisServer();
  if (redisPath === undefined)
    throw new GatewayError(
      "engine_unavailable",
      `the kvevents study's shared-Redis conditions need a redis-server: ${REDIS_SERVER_MISSING}`,
    );
  const plan = options.quick ? QUICK : FULL;
  const guard = new InterruptGuard();
  const rows: Row[] = [];
  const records: CodingRecord[] = [];
  const configs: unknown[] = [];
  let redis: RedisServer | undefined;
  try {
    redis = await startRedisServer(redisPath, { onSpawn: (kill) => void guard.add(kill) });
    for (const c of selectConditions(conditionsOf(plan), options.conditions)) {
      const run = await runCondition(plan, c, options, guard, redis.url);
      const bySignal = (signalled: boolean): KvStudyNumbers =>
        kvStudyNumbers(
          run.records.filter((r) => sendsSignal(r.sessionId) === signalled),
          options.timeScale,
        );
      rows.push({
        ...c,
        ...kvStudyNumbers(run.records, options.timeScale),
        signalled: bySignal(true),
        unsignalled: bySignal(false),
      });
      records.push(...run.records);
      configs.push(run.config);
    }
  } finally {
    await redis?.stop();
    guard.dispose();
  }
  const checks = kvEventsChecks(rows);
  const w = plan.workload;
  const tokens = (chars: number): string => count(Math.round(chars / 4));
  return {
    study: "kvevents",
    verdict: kvEventsVerdict(rows, checks),
    title: "KV events under KV pressure: approximate vs event-driven placement, 1 and 3 gateway replicas",
    description:
      `${ENGINES} simulated ${PROFILE} engines (max_model_len ${MAX_MODEL_LEN}, max_inflight ${MAX_INFLIGHT} per replica), ` +
      `every one publishing vLLM KV events; KV caches of ${plan.pressures.map((p) => `${count(plan.kvCapacityBlocks[p])} blocks (${count(plan.kvCapacityBlocks[p] * 16)} tokens, ${p})`).join(" or ")}. ` +
      `${w.sessions} coding-agent sessions, every other one from a client naming its session (${CLIENT_SESSION_HEADER}, ` +
      `sub-agents included), the rest from one that does not; ${w.turns.min}-${w.turns.max} calls each: ` +
      `a shared ${tokens(w.systemPromptChars)}-token system prompt, a first call carrying ${tokens(w.openingContextChars!.min)}-${tokens(w.openingContextChars!.max)} ` +
      `tokens of context, then tool results of ${tokens(w.toolResultChars.min)}-${tokens(w.toolResultChars.max)} tokens per call; ` +
      `${pct(w.burstShare)} of the sessions fan out a burst of ${w.burstSize.min}-${w.burstSize.max} sub-agents (median ${w.burstSize.median}) ` +
      `of ${w.subagentTurns.min}-${w.subagentTurns.max} calls with their own ${tokens(w.subagentPromptChars)}-token system prompt. ` +
      "Approximate: today's placement (bindings, rendezvous, bounded load, spills by the session's ranking), the " +
      "gateway told nothing of the engines' caches. Events: the same gateway subscribed to every engine's KV events " +
      "(docs/kv-events.md). Three replicas: separate gateway processes, every call sent to the next replica; bindings " +
      "in memory (no shared state), or, for event-driven placement, also in a real redis-server the study starts, " +
      "through which the replicas share their sends' pending blocks. Fresh engines and gateways for every " +
      "condition; the same workload in each.",
    seed: options.seed,
    timeScale: options.timeScale,
    configs,
    records,
    tables: [
      {
        title: "Per condition (latencies in simulated seconds, from the client)",
        columns: [
          "condition",
          "calls (sub-agents)",
          "failed",
          "prompt tokens cached",
          "prompt tokens recomputed",
          "TTFT p50 / p99",
          "sessions' own calls: TTFT p50 / p99",
          "sub-agents' calls: TTFT p50 / p99",
          `prediction within ${pct(PREDICTION_TOLERANCE)} (calls)`,
          "prediction error mean / max",
          "over / under",
          "largest prompt",
        ],
        rows: rows.map((r) => [
          label(r),
          `${r.requests} (${r.subagentRequests})`,
          r.failed,
          pct(r.cachedShare),
          count(r.recomputedTokens),
          `${sec(r.ttftP50Seconds)} / ${sec(r.ttftP99Seconds)}`,
          `${sec(r.mainTtftP50Seconds)} / ${sec(r.mainTtftP99Seconds)}`,
          `${sec(r.subagentTtftP50Seconds)} / ${sec(r.subagentTtftP99Seconds)}`,
          r.predictedTurns === 0 ? "-" : `${pct(r.predictionWithinTolerance)} (${r.predictedTurns})`,
          r.predictedTurns === 0 ? "-" : `${pct(r.predictionErrorMean)} / ${pct(r.predictionErrorMax)}`,
          r.predictedTurns === 0 ? "-" : `${r.predictedOver} / ${r.predictedUnder}`,
          count(r.largestPromptTokens),
        ]),
      },
      {
        title: "Prompt tokens cached, by client: the sessions that name themselves vs those that do not",
        columns: [
          "condition",
          "with the session header",
          "without",
          "TTFT p50 / p99 with",
          "TTFT p50 / p99 without",
        ],
        rows: rows.map((r) => [
          label(r),
          pct(r.signalled.cachedShare),
          pct(r.unsignalled.cachedShare),
          `${sec(r.signalled.ttftP50Seconds)} / ${sec(r.signalled.ttftP99Seconds)}`,
          `${sec(r.unsignalled.ttftP50Seconds)} / ${sec(r.unsignalled.ttftP99Seconds)}`,
        ]),
      },
      {
        title: "Why each call went where it went (x_agent_serve.reason)",
        columns: ["condition", "reasons"],
        rows: rows.map((r) => [label(r), reasonsText(r.reasons)]),
      },
    ],
    charts: [
      {
        file: "kvevents-cached.svg",
        caption: "Prompt tokens served from the engines' prefix cache, per condition",
        svg: barChart({
          title: "KV reuse: approximate vs event-driven placement",
          yLabel: "% of prompt tokens cached",
          series: ["approximate", "events"],
          groups: pairs(rows).map(({ approximate, events }) => ({
            label: pairName(events),
            values: [approximate.cachedShare * 100, events.cachedShare * 100],
          })),
          yMax: 100,
        }),
      },
      {
        file: "kvevents-ttft.svg",
        caption: "TTFT p50 and p99 per condition (simulated seconds)",
        svg: barChart({
          title: "Time to first token",
          yLabel: "seconds (simulated)",
          series: ["p50", "p99"],
          groups: rows.map((r) => ({
            label: `${r.pressure} r${r.replicas} ${r.placement}`,
            values: [r.ttftP50Seconds, r.ttftP99Seconds],
          })),
          valueFormat: (v: number) => v.toFixed(1),
        }),
      },
    ],
    checks,
    notes: [
      "TTFT is measured by the client, from sending a call to its first content token, in simulated seconds " +
        "(wall time x the time scale): it includes the gateway's own time, scaled.",
    ],
    data: Object.fromEntries(rows.map((r) => [r.name, r])),
  };
}
