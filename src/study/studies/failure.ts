// Study 4 of the original: steady traffic while one small engine dies and comes back.
import { GatewayError } from "../../core/errors.js";
import { pct } from "../analysis.js";
import { StudyEnvironment } from "../environment.js";
import { metricValue, scrapeMetrics } from "../../metrics/prometheus-text.js";
import type { StudyOptions } from "../progress.js";
import type { StudyResult } from "../result.js";
import { runSessions } from "../session-runner.js";
import { lineChart } from "../svg-charts.js";
import { generateWorkload } from "../workload.js";
import { SMALL_ENGINES } from "./affinity.js";

interface Schedule {
  durationMs: number;
  stopAtMs: number;
  restartAtMs: number;
  engineTimeScale: number;
  health: Record<string, number>;
}

/** Full run: the original's health settings in real time. Quick run (test suite): everything ten times faster. */
const FULL: Schedule = {
  durationMs: 50_000,
  stopAtMs: 10_000,
  restartAtMs: 25_000,
  engineTimeScale: 1,
  health: {
    probe_interval_seconds: 10,
    failures_to_mark_down: 3,
    successes_to_mark_up: 2,
    probe_timeout_seconds: 5,
  },
};
const QUICK: Schedule = {
  durationMs: 5_000,
  stopAtMs: 1_000,
  restartAtMs: 2_500,
  engineTimeScale: 10,
  health: {
    probe_interval_seconds: 0.5,
    failures_to_mark_down: 3,
    successes_to_mark_up: 2,
    probe_timeout_seconds: 0.5,
  },
};

const VICTIM = "small-1";
const CONCURRENCY = 8;

export async function runFailureStudy(options: StudyOptions): Promise<StudyResult> {
  if (options.gatewayUrl !== undefined) {
    throw new GatewayError(
      "usage_error",
      "the failure study stops and restarts an engine itself, so it cannot drive an external gateway",
    );
  }
  const schedule = options.quick ? QUICK : FULL;
  const env = await StudyEnvironment.start({
    engines: SMALL_ENGINES,
    config: { health: schedule.health },
    timeScale: schedule.engineTimeScale,
    seed: options.seed,
  });
  const events: { atMs: number; label: string }[] = [];
  let started = 0;
  const since = (): number => performance.now() - started;
  const offHealth = env.gateway.runtime.registry.onHealthChange((t) => {
    if (t.backend.id === VICTIM) events.push({ atMs: since(), label: `marked ${t.to} (${t.cause})` });
  });
  let heldAtStop = 0;
  let brokenBefore = 0;
  const timers: NodeJS.Timeout[] = [];
  try {
    const sessions = generateWorkload({
      seed: options.seed,
      sessions: CONCURRENCY * 2,
      turns: 1000, // more than the run can use: sessions keep going until the time box ends
      systemPromptChars: 3000,
      sharedSystemPrompt: true,
      userChars: 300,
      maxTokens: 32,
      toolCallRate: 0,
      thinkTimeMs: 0,
      idPrefix: `${options.runId}-failure`,
    });
    brokenBefore = metricValue(await scrapeMetrics(env.url), "agentserve_affinity_broken_total", {
      tier: "small",
    });
    options.progress.start("failure", Math.round(schedule.durationMs / 1000));
    started = performance.now();
    timers.push(
      setTimeout(() => {
        heldAtStop = env.gateway.runtime.scheduler.bindingsOf(VICTIM);
        env.stopEngine(VICTIM);
        events.push({ atMs: since(), label: "engine stopped" });
      }, schedule.stopAtMs),
      setTimeout(() => {
        void env.restartEngine(VICTIM).then(() => events.push({ atMs: since(), label: "engine restarted" }));
      }, schedule.restartAtMs),
    );
    const tick = setInterval(() => options.progress.tick(false), 1000);
    timers.push(tick);
    const records = await runSessions({
      condition: "failure",
      sessions,
      concurrency: CONCURRENCY,
      pool: env.pool,
      timeScale: env.timeScale,
      stream: false,
      tierHint: "small",
      shouldStop: () => since() >= schedule.durationMs,
    });
    options.progress.done();
    const brokenAfter = metricValue(await scrapeMetrics(env.url), "agentserve_affinity_broken_total", {
      tier: "small",
    });
    return report(options, env, schedule, records, events, heldAtStop, brokenAfter - brokenBefore);
  } finally {
    for (const timer of timers) clearTimeout(timer);
    offHealth();
    await env.close();
  }
}

function report(
  options: StudyOptions,
  env: StudyEnvironment,
  schedule: Schedule,
  records: Awaited<ReturnType<typeof runSessions>>,
  events: { atMs: number; label: string }[],
  heldAtStop: number,
  broken: number,
): StudyResult {
  const seconds = Math.ceil(schedule.durationMs / 1000) + 5;
  const ok = new Array<number>(seconds).fill(0);
  const failed = new Array<number>(seconds).fill(0);
  for (const r of records) {
    const second = Math.min(seconds - 1, Math.floor((r.startMs + r.e2eMs) / 1000));
    if (r.status === 200 && r.ok) ok[second]!++;
    else failed[second]!++;
  }
  const lastSecond = Math.max(...records.map((r) => Math.floor((r.startMs + r.e2eMs) / 1000)), 0);
  const at = (label: string): number | undefined => events.find((e) => e.label.startsWith(label))?.atMs;
  const stoppedAt = at("engine stopped");
  const downAt = at("marked down");
  const restartedAt = at("engine restarted");
  const upAt = at("marked up");
  const failures = records.filter((r) => !(r.status === 200 && r.ok)).length;
  const retried = records.filter((r) => (r.attempts ?? 1) > 1).length;
  const ms = (value: number | undefined): string => (value === undefined ? "-" : `${Math.round(value)} ms`);
  const detection = stoppedAt !== undefined && downAt !== undefined ? downAt - stoppedAt : undefined;
  const recovery = restartedAt !== undefined && upAt !== undefined ? upAt - restartedAt : undefined;
  return {
    study: "failure",
    title: "Failure study (the original's Study 4, on simulated engines)",
    description:
      `Two qwen2.5-7b engines (time scale ${schedule.engineTimeScale}) in the small tier; ${CONCURRENCY} closed-loop ` +
      `workers sending non-streaming requests (max_tokens 32) for ${schedule.durationMs / 1000} s of wall time; ` +
      `${VICTIM} is killed (stops listening, drops connections) at ${schedule.stopAtMs / 1000} s and restarted with an ` +
      `empty cache at ${schedule.restartAtMs / 1000} s. Health settings: ${JSON.stringify(schedule.health)}. ` +
      "Times here are wall-clock: the gateway's health checking runs in real time.",
    seed: options.seed,
    timeScale: schedule.engineTimeScale,
    configs: [env.config],
    records,
    tables: [
      {
        title: "Outcome",
        columns: [
          "requests",
          "failed",
          "retried on another engine",
          "bindings held at stop",
          "bindings broken",
          "time to mark down",
          "time to mark up after restart",
        ],
        rows: [[records.length, failures, retried, heldAtStop, broken, ms(detection), ms(recovery)]],
      },
      {
        title: "Events (wall clock since the start)",
        columns: ["at", "event"],
        rows: events.map((e) => [ms(e.atMs), e.label]),
      },
      {
        title: "Timeline (requests completed per second)",
        columns: ["second", "succeeded", "failed"],
        rows: ok.slice(0, lastSecond + 1).map((n, i) => [i, n, failed[i]!]),
      },
    ],
    charts: [
      {
        file: "failure-timeline.svg",
        caption:
          "Requests completed per second, succeeded and failed, with the engine's stop, detection, restart and recovery",
        svg: lineChart({
          title: "Engine death and recovery under traffic",
          xLabel: "seconds",
          yLabel: "requests completed",
          stacked: true,
          series: [
            { name: "succeeded", points: ok.slice(0, lastSecond + 1).map((y, x) => ({ x, y })) },
            { name: "failed", points: failed.slice(0, lastSecond + 1).map((y, x) => ({ x, y })) },
          ],
          markers: events.map((e) => ({ x: e.atMs / 1000, label: e.label })),
          yMin: 0,
        }),
      },
    ],
    checks: [
      {
        claim: "no failed non-streaming request while the engine dies",
        passed: failures === 0,
        detail: `${failures} of ${records.length} failed (the original: 65% 502s in the 4 s after)`,
      },
      {
        claim: "the dead engine was marked down",
        passed: detection !== undefined,
        detail: `after ${ms(detection)}`,
      },
      {
        claim: "bindings broken equal the bindings it held",
        passed: broken === heldAtStop,
        detail: `${broken} broken, ${heldAtStop} held`,
      },
      {
        claim: "the restarted engine was marked up",
        passed: recovery !== undefined,
        detail: `after ${ms(recovery)}`,
      },
    ],
    notes: [`Success rate ${pct(records.length === 0 ? 0 : (records.length - failures) / records.length)}.`],
    data: {
      requests: records.length,
      failures,
      retried,
      heldAtStop,
      broken,
      detectionMs: detection ?? null,
      recoveryMs: recovery ?? null,
      events,
    },
  };
}
