// Issue 14's scenario as a study: three gateway processes behind a round-robin "Service", four engines, a
// transient 503, an engine outage and recovery, a replica restart; bindings in memory vs in a real Redis.
import { Pool } from "undici";
import { pct, sec, simSeconds } from "../analysis.js";
import { EXACT_LENGTH, sendChatTurn } from "../chat-client.js";
import { GatewayFleet } from "../gateway-fleet.js";
import { InterruptGuard } from "../interrupt-guard.js";
import type { StudyOptions } from "../progress.js";
import type { Check, StudyResult, Table } from "../result.js";
import { appendTurn, type RequestRecord } from "../session-runner.js";
import { percentile, ratio } from "../stats.js";
import { barChart } from "../svg-charts.js";
import { generateWorkload, type SessionPlan } from "../workload.js";
import type { GatewayConfig } from "../../config/schema.js";
import { startSimEngine, type SimEngineHandle } from "../../sim/index.js";
import {
  REDIS_SERVER_MISSING,
  findRedisServer,
  startRedisServer,
  type RedisServer,
} from "../../store/redis-server.js";

export type StoreKind = "memory" | "redis";
const STORES: readonly StoreKind[] = ["memory", "redis"];

const REPLICAS = 3;
/** The replica that restarts in the last phase (a rolling deploy's first pod). */
const RESTARTED_REPLICA = 1;
const ENGINE_IDS = ["engine-0", "engine-1", "engine-2", "engine-3"];
const PROFILE = "qwen2.5-7b";
const MODEL = "Qwen/Qwen2.5-7B-Instruct";
const TIER = "small";
/** Health checks fast enough that an outage is seen within a second; the probes run in wall-clock time. */
const HEALTH = {
  probe_interval_seconds: 0.1,
  probe_timeout_seconds: 0.5,
  failures_to_mark_down: 3,
  successes_to_mark_up: 2,
};
/**
 * affinity.store.timeout_ms. The default (50) is for a gateway with cores of its own; here three gateways,
 * four engines, the client and redis-server share the machine (2 cores in docs/load-study.md), where a
 * process descheduled for 50 ms is common. A call that times out fails open: the replica decides alone and
 * may move a session, which the report counts (binding_store_errors_total) and the checks flag.
 */
const STORE_TIMEOUT_MS = 200;
/** Requests that meet the transient 503 (the issue: two). */
const TRANSIENT_FAILURES = 2;

export const PHASES = ["warm-up", "transient 503", "engine outage and recovery", "replica restart"] as const;
export type Phase = (typeof PHASES)[number];
/** Chart labels: the bars' groups have little room. */
const PHASE_LABELS: Record<Phase, string> = {
  "warm-up": "warm-up",
  "transient 503": "503",
  "engine outage and recovery": "outage",
  "replica restart": "restart",
};

interface Plan {
  sessions: number;
  /** Rounds before the 503 (the first places every session; it has no previous turn to compare with). */
  warmRounds: number;
  after503Rounds: number;
  /** After the one round during the outage. */
  afterRecoveryRounds: number;
  afterRestartRounds: number;
}

const FULL: Plan = {
  sessions: 30,
  warmRounds: 2,
  after503Rounds: 6,
  afterRecoveryRounds: 4,
  afterRestartRounds: 6,
};
const QUICK: Plan = {
  sessions: 12,
  warmRounds: 2,
  after503Rounds: 3,
  afterRecoveryRounds: 3,
  afterRestartRounds: 3,
};

export interface PhaseTally {
  /** Turns served, each with a served turn of its session before it. */
  turns: number;
  /** ...on the engine that served the session's previous turn. */
  kept: number;
  /** Moved because the previous engine was down or failing the request. */
  forced: number;
  /** Moved although the previous engine was fine. */
  unforced: number;
  /** The gateway's `reason` for each unforced move. */
  unforcedReasons: Record<string, number>;
  promptTokens: number;
  cachedTokens: number;
}

export interface StoreNumbers {
  store: StoreKind;
  requests: number;
  failed: number;
  errors: string[];
  turns: number;
  kept: number;
  forced: number;
  unforced: number;
  prefixCacheHitRate: number;
  ttftP50Seconds: number;
  ttftP99Seconds: number;
  e2eP50Seconds: number;
  e2eP99Seconds: number;
  /** agentserve_affinity_broken_total summed over the replicas (the restarted one's first life included). */
  broken: number;
  /** agentserve_binding_store_errors_total likewise: store calls that failed open. */
  storeErrors: number;
  /** Sessions whose previous turn ran on the engine that went down. */
  heldByDead: number;
  flakyEngine: string;
  deadEngine: string;
  phases: Record<Phase, PhaseTally>;
}

interface SessionState {
  plan: SessionPlan;
  index: number;
  history: unknown[];
  /** Turns sent so far. */
  sent: number;
  /** The engine of the last served turn. */
  engine: string | undefined;
}

/** Rounds of the whole scenario (each a turn of every session). */
function roundsOf(plan: Plan): number {
  return plan.warmRounds + plan.after503Rounds + 1 + plan.afterRecoveryRounds + plan.afterRestartRounds;
}

function emptyTally(): PhaseTally {
  return { turns: 0, kept: 0, forced: 0, unforced: 0, unforcedReasons: {}, promptTokens: 0, cachedTokens: 0 };
}

/** The engine holding the most sessions (ties: the first id), among `ids`. */
function busiest(sessions: readonly SessionState[], ids: readonly string[]): string {
  let best = ids[0]!;
  let bestCount = -1;
  for (const id of ids) {
    const count = sessions.filter((s) => s.engine === id).length;
    if (count > bestCount) [best, bestCount] = [id, count];
  }
  return best;
}

function storeConfig(store: StoreKind, redis: RedisServer | undefined): Record<string, unknown> {
  if (store === "memory") return { kind: "memory" };
  return { kind: "redis", url: redis!.url, timeout_ms: STORE_TIMEOUT_MS, key_prefix: "agentserve-study:" };
}

/** One store's run: fresh engines, fresh replicas, the whole scenario. */
async function runStore(
  store: StoreKind,
  redis: RedisServer | undefined,
  plan: Plan,
  options: StudyOptions,
  guard: InterruptGuard,
): Promise<{ numbers: StoreNumbers; records: RequestRecord[]; config: GatewayConfig }> {
  const engines = new Map<string, SimEngineHandle>();
  const pools = new Map<string, Pool>();
  let fleet: GatewayFleet | undefined;
  try {
    for (const [index, id] of ENGINE_IDS.entries()) {
      engines.set(
        id,
        await startSimEngine({
          profile: PROFILE,
          model: MODEL,
          timeScale: options.timeScale,
          seed: options.seed + index,
        }),
      );
    }
    const config = {
      server: { host: "127.0.0.1", port: 0 },
      health: HEALTH,
      affinity: { store: storeConfig(store, redis) },
      backends: ENGINE_IDS.map((id) => ({ id, tier: TIER, base_url: engines.get(id)!.url, model: MODEL })),
    };
    // Every gateway process is registered with the guard as it spawns: an interrupt kills them all.
    fleet = await GatewayFleet.start(config, REPLICAS, guard);
    const f = fleet;

    const poolFor = (url: string): Pool => {
      let pool = pools.get(url);
      if (pool === undefined) {
        pool = new Pool(url, { connections: 4, pipelining: 1 });
        pools.set(url, pool);
      }
      return pool;
    };
    const started = performance.now();
    const now = (): number => performance.now() - started;
    const sessions: SessionState[] = generateWorkload({
      seed: options.seed,
      sessions: plan.sessions,
      turns: roundsOf(plan) + 1, // the sessions that meet the 503 take one turn more
      systemPromptChars: 3000,
      sharedSystemPrompt: false,
      userChars: 300,
      maxTokens: 16,
      toolCallRate: 0,
      thinkTimeMs: 0,
      // Fixed ids (not the run id): every run starts its own replicas and store, and the same ids place the
      // same way, so runs repeat exactly.
      idPrefix: `replicas-s${options.seed}`,
    }).map((p, index) => ({
      plan: p,
      index,
      history: [{ role: "system", content: p.systemPrompt }],
      sent: 0,
      engine: undefined,
    }));
    const records: RequestRecord[] = [];
    const tallies = Object.fromEntries(PHASES.map((p) => [p, emptyTally()])) as Record<Phase, PhaseTally>;
    /** Engines that are down or failing requests right now: a move away from one is forced. */
    const unavailable = new Set<string>();

    const turn = async (s: SessionState, phase: Phase): Promise<void> => {
      // Each turn of a session goes to the next replica, as a Service spreading connections would send it.
      const replica = (s.index + s.sent) % REPLICAS;
      appendTurn(s.history, s.plan, s.sent);
      const startMs = now();
      const result = await sendChatTurn(
        poolFor(f.url(replica)),
        {
          sessionId: s.plan.id,
          messages: s.history,
          maxTokens: s.plan.turns[s.sent]!.maxTokens,
          stream: true,
          extraBody: EXACT_LENGTH,
          tierHint: TIER,
        },
        now,
      );
      records.push({
        ...result,
        condition: `${store}:${phase}`,
        sessionId: s.plan.id,
        turn: s.sent + 1,
        startMs,
      });
      s.history.push({ role: "assistant", content: result.reply });
      s.sent++;
      options.progress.tick(!(result.ok && result.status === 200));
      if (!(result.ok && result.status === 200) || result.backend === null) return;
      const tally = tallies[phase];
      tally.promptTokens += result.promptTokens;
      tally.cachedTokens += result.cachedTokens;
      const previous = s.engine;
      s.engine = result.backend;
      if (previous === undefined) return;
      tally.turns++;
      if (result.backend === previous) tally.kept++;
      else if (unavailable.has(previous)) tally.forced++;
      else {
        tally.unforced++;
        const reason = result.reason ?? "unknown";
        tally.unforcedReasons[reason] = (tally.unforcedReasons[reason] ?? 0) + 1;
      }
    };
    const round = async (phase: Phase): Promise<void> => {
      // One turn at a time: placement depends on load, so only sequential turns place the same way every run.
      for (const s of sessions) await turn(s, phase);
    };
    const rounds = async (count: number, phase: Phase): Promise<void> => {
      for (let i = 0; i < count; i++) await round(phase);
    };

    options.progress.start(`replicas:${store}`, plan.sessions * roundsOf(plan) + TRANSIENT_FAILURES);
    await rounds(plan.warmRounds, "warm-up");

    // Phase 1: two requests meet a transient 503 on one engine, which is fine again right after.
    const flaky = busiest(sessions, ENGINE_IDS);
    const onFlaky = sessions.filter((s) => s.engine === flaky).slice(0, TRANSIENT_FAILURES);
    engines.get(flaky)!.setFault({ kind: "error_rate", rate: 1, status: 503 });
    unavailable.add(flaky);
    for (const s of onFlaky) await turn(s, "transient 503");
    engines.get(flaky)!.setFault({ kind: "none" });
    unavailable.delete(flaky);
    await rounds(plan.after503Rounds, "transient 503");

    // Phase 2: an engine dies (every replica's probes see it), one round, it comes back empty (a restart).
    const dead = busiest(
      sessions,
      ENGINE_IDS.filter((id) => id !== flaky),
    );
    const heldByDead = sessions.filter((s) => s.engine === dead).length;
    const deadEngine = engines.get(dead)!;
    deadEngine.setFault({ kind: "die" });
    await deadEngine.close();
    unavailable.add(dead);
    await f.waitForBackend(dead, "down");
    await round("engine outage and recovery");
    engines.set(
      dead,
      await startSimEngine({
        profile: PROFILE,
        model: MODEL,
        timeScale: options.timeScale,
        seed: options.seed + 100,
        port: deadEngine.port,
      }),
    );
    await f.waitForBackend(dead, "up");
    unavailable.delete(dead);
    await rounds(plan.afterRecoveryRounds, "engine outage and recovery");

    // Phase 3: one replica restarts (a rolling deploy): a fresh process, same config. Its counters start
    // again at 0, so what the old process counted is read first.
    const brokenByOld = await f.metric(RESTARTED_REPLICA, "agentserve_affinity_broken_total", { tier: TIER });
    const errorsByOld = await f.metric(RESTARTED_REPLICA, "agentserve_binding_store_errors_total");
    const oldUrl = f.url(RESTARTED_REPLICA);
    await pools.get(oldUrl)?.close();
    pools.delete(oldUrl);
    await f.restart(RESTARTED_REPLICA);
    await rounds(plan.afterRestartRounds, "replica restart");
    options.progress.done();

    const broken = brokenByOld + (await f.sum("agentserve_affinity_broken_total", { tier: TIER }));
    const storeErrors = errorsByOld + (await f.sum("agentserve_binding_store_errors_total"));
    return {
      numbers: numbersOf(store, records, tallies, options.timeScale, {
        broken,
        storeErrors,
        heldByDead,
        flakyEngine: flaky,
        deadEngine: dead,
      }),
      records,
      config: f.config,
    };
  } finally {
    for (const pool of pools.values()) await pool.close();
    await fleet?.close();
    await Promise.all([...engines.values()].map((e) => e.close()));
  }
}

function numbersOf(
  store: StoreKind,
  records: readonly RequestRecord[],
  phases: Record<Phase, PhaseTally>,
  timeScale: number,
  counted: Pick<StoreNumbers, "broken" | "storeErrors" | "heldByDead" | "flakyEngine" | "deadEngine">,
): StoreNumbers {
  const ok = records.filter((r) => r.ok && r.status === 200);
  const failed = records.filter((r) => !(r.ok && r.status === 200));
  const all = Object.values(phases);
  const sum = (pick: (t: PhaseTally) => number): number => all.reduce((n, t) => n + pick(t), 0);
  const seconds = (values: (number | null)[]): number[] =>
    values.filter((v): v is number => v !== null).map((ms) => simSeconds(ms, timeScale));
  const ttft = seconds(ok.map((r) => r.ttftMs));
  const e2e = seconds(ok.map((r) => r.e2eMs));
  return {
    store,
    requests: records.length,
    failed: failed.length,
    errors: failed.map((r) => `${r.sessionId} turn ${r.turn}: ${r.status} ${r.error ?? ""}`.trim()),
    turns: sum((t) => t.turns),
    kept: sum((t) => t.kept),
    forced: sum((t) => t.forced),
    unforced: sum((t) => t.unforced),
    prefixCacheHitRate: ratio(
      ok.reduce((n, r) => n + r.cachedTokens, 0),
      ok.reduce((n, r) => n + r.promptTokens, 0),
    ),
    ttftP50Seconds: percentile(ttft, 50),
    ttftP99Seconds: percentile(ttft, 99),
    e2eP50Seconds: percentile(e2e, 50),
    e2eP99Seconds: percentile(e2e, 99),
    ...counted,
    phases,
  };
}

export async function runReplicasStudy(options: StudyOptions): Promise<StudyResult> {
  if (options.gatewayUrl !== undefined) {
    throw new Error(
      "the replicas study starts its own gateway replicas, engines and redis-server: drop --gateway",
    );
  }
  const redisPath = findRedisServer();
  if (redisPath === undefined)
    throw new Error(`the replicas study's redis condition needs a redis-server: ${REDIS_SERVER_MISSING}`);
  const plan = options.quick ? QUICK : FULL;
  const guard = new InterruptGuard();
  let redis: RedisServer | undefined;
  try {
    redis = await startRedisServer(redisPath, { onSpawn: (kill) => void guard.add(kill) });
    const results: StoreNumbers[] = [];
    const records: RequestRecord[] = [];
    const configs: GatewayConfig[] = [];
    for (const store of STORES) {
      const run = await runStore(store, redis, plan, options, guard);
      results.push(run.numbers);
      records.push(...run.records);
      configs.push(run.config);
    }
    return report(options, plan, results, records, configs);
  } finally {
    await redis?.stop();
    guard.dispose();
  }
}

function reasons(tally: PhaseTally): string {
  const entries = Object.entries(tally.unforcedReasons).sort((a, b) => b[1] - a[1]);
  return entries.length === 0 ? "-" : entries.map(([reason, n]) => `${reason} ${n}`).join(", ");
}

function report(
  options: StudyOptions,
  plan: Plan,
  results: readonly StoreNumbers[],
  records: RequestRecord[],
  configs: GatewayConfig[],
): StudyResult {
  const of = (store: StoreKind): StoreNumbers => results.find((r) => r.store === store)!;
  const memory = of("memory");
  const redis = of("redis");
  const perStore: Table = {
    title: "Per store (latencies in simulated seconds)",
    columns: [
      "affinity.store",
      "requests",
      "failed",
      "turns on the previous turn's engine",
      "forced moves",
      "other moves",
      "engine prefix-cache hit rate",
      "TTFT p50 / p99",
      "E2E p50 / p99",
      "affinity_broken_total (all replicas)",
      "binding_store_errors_total",
    ],
    rows: results.map((r) => [
      r.store,
      r.requests,
      r.failed,
      `${r.kept} of ${r.turns} (${pct(ratio(r.kept, r.turns))})`,
      r.forced,
      r.unforced,
      pct(r.prefixCacheHitRate),
      `${sec(r.ttftP50Seconds)} / ${sec(r.ttftP99Seconds)}`,
      `${sec(r.e2eP50Seconds)} / ${sec(r.e2eP99Seconds)}`,
      r.broken,
      r.storeErrors,
    ]),
  };
  const perPhase: Table = {
    title: "Per phase",
    columns: [
      "phase",
      "affinity.store",
      "turns on the previous turn's engine",
      "forced moves",
      "other moves (the gateway's reason)",
      "engine prefix-cache hit rate",
    ],
    rows: PHASES.flatMap((phase) =>
      results.map((r) => {
        const t = r.phases[phase];
        return [
          phase,
          r.store,
          `${t.kept} of ${t.turns}`,
          t.forced,
          t.unforced === 0 ? "0" : `${t.unforced} (${reasons(t)})`,
          pct(ratio(t.cachedTokens, t.promptTokens)),
        ];
      }),
    ),
  };
  const checks: Check[] = [];
  for (const r of results) {
    checks.push({
      claim: `${r.store}: every request served`,
      passed: r.failed === 0,
      detail:
        r.failed === 0
          ? `${r.requests} of ${r.requests}`
          : `${r.failed} failed: ${r.errors.slice(0, 3).join("; ")}`,
    });
  }
  checks.push(
    {
      claim: "redis: every turn on the session's previous engine except forced moves",
      passed: redis.unforced === 0 && redis.kept + redis.forced === redis.turns,
      detail: `${redis.kept} kept + ${redis.forced} forced of ${redis.turns}; ${redis.unforced} other moves`,
    },
    {
      claim: "redis: forced moves are the two 503s and the dead engine's sessions",
      passed: redis.forced === TRANSIENT_FAILURES + redis.heldByDead,
      detail: `${redis.forced} forced, ${TRANSIENT_FAILURES} + ${redis.heldByDead} expected`,
    },
    {
      claim: "redis: broken bindings counted once over the replicas",
      passed: redis.broken === TRANSIENT_FAILURES + redis.heldByDead,
      detail: `${redis.broken} broken; ${TRANSIENT_FAILURES} failed requests + ${redis.heldByDead} held by ${redis.deadEngine}`,
    },
    {
      claim: `redis: no store call failed open (none slower than ${STORE_TIMEOUT_MS} ms)`,
      passed: redis.storeErrors === 0,
      detail: `${redis.storeErrors} store errors`,
    },
    {
      claim: "memory: replicas disagree and move sessions without cause (the issue's finding)",
      passed: memory.unforced > 0,
      detail: `${memory.unforced} other moves; ${memory.kept} of ${memory.turns} turns kept`,
    },
  );
  const continuity = (r: StoreNumbers, phase: Phase): number =>
    ratio(r.phases[phase].kept, r.phases[phase].turns) * 100;
  const hitRate = (r: StoreNumbers, phase: Phase): number =>
    ratio(r.phases[phase].cachedTokens, r.phases[phase].promptTokens) * 100;
  const engines = ENGINE_IDS.length;
  return {
    study: "replicas",
    title: "Replicas study: three gateways sharing bindings in memory (per process) vs in Redis",
    description:
      `${REPLICAS} gateway replicas (child processes, one config) in front of ${engines} ${PROFILE} engines ` +
      `(simulated, time scale ${options.timeScale}); ${plan.sessions} sessions with their own 3,000-character ` +
      "system prompt, 300-character user turns, streaming, max_tokens 16, one turn at a time; each turn of a " +
      "session goes to the next replica (round-robin, as a Kubernetes Service spreads connections). Phases: " +
      `${plan.warmRounds} rounds; ${TRANSIENT_FAILURES} requests meet a 503 on the busiest engine, then ` +
      `${plan.after503Rounds} rounds; another engine dies, one round, it restarts empty, ${plan.afterRecoveryRounds} ` +
      `rounds; replica ${RESTARTED_REPLICA} restarts, ${plan.afterRestartRounds} rounds. A move is forced when the ` +
      "previous engine was down or failing the request. The redis store is a real redis-server started by the " +
      `study; health probes every ${HEALTH.probe_interval_seconds} s, ${HEALTH.failures_to_mark_down} failures mark down.`,
    seed: options.seed,
    timeScale: options.timeScale,
    configs,
    records,
    tables: [perStore, perPhase],
    charts: [
      {
        file: "replicas-continuity.svg",
        caption:
          "Turns on the engine of the session's previous turn, per phase and store (forced moves count against)",
        svg: barChart({
          title: "Turn-to-turn continuity across three replicas",
          yLabel: "% of turns",
          series: [...STORES],
          groups: PHASES.map((phase) => ({
            label: PHASE_LABELS[phase],
            values: results.map((r) => continuity(r, phase)),
          })),
          yMax: 100,
        }),
      },
      {
        file: "replicas-prefix-cache.svg",
        caption: "The engines' prefix-cache hit rate (cached / prompt tokens), per phase and store",
        svg: barChart({
          title: "Engine prefix-cache hit rate",
          yLabel: "%",
          series: [...STORES],
          groups: PHASES.map((phase) => ({
            label: PHASE_LABELS[phase],
            values: results.map((r) => hitRate(r, phase)),
          })),
          yMax: 100,
        }),
      },
    ],
    checks,
    notes: [
      `Engine that met the 503s: ${redis.flakyEngine} (redis run), ${memory.flakyEngine} (memory run); engine that ` +
        `went down: ${redis.deadEngine} holding ${redis.heldByDead} sessions (redis), ${memory.deadEngine} holding ` +
        `${memory.heldByDead} (memory).`,
      "The memory store's affinity_broken_total counts each replica's own copy of a binding.",
    ],
    data: Object.fromEntries(results.map((r) => [r.store, r])),
  };
}
