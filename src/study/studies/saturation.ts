// Study 1 of the original: the small tier under rising concurrency, 2-turn sessions, with repetitions.
import { analyze, pct, sec } from "../analysis.js";
import { StudyEnvironment, externalTarget, type StudyTarget } from "../environment.js";
import type { StudyOptions } from "../progress.js";
import type { StudyResult } from "../result.js";
import { runCondition, type RequestRecord } from "../session-runner.js";
import { percentile } from "../stats.js";
import { lineChart } from "../svg-charts.js";
import { generateWorkload } from "../workload.js";
import { SMALL_ENGINES } from "./affinity.js";

const LEVELS = [1, 4, 8, 16];

interface LevelResult {
  concurrency: number;
  repetitions: number;
  requests: number;
  failed: number;
  bindingHitRate: number;
  prefixCacheHitRate: number;
  e2eP50Seconds: number;
  e2eP95Seconds: number;
  ttftP50Seconds: number;
  /** p50 E2E of each repetition: their spread shows how stable the level is. */
  e2eP50PerRepetition: number[];
}

export async function runSaturationStudy(options: StudyOptions): Promise<StudyResult> {
  const repetitions = options.quick ? 1 : 3;
  const levels = options.quick ? [1, 4] : LEVELS;
  const records: RequestRecord[] = [];
  const configs: unknown[] = [];
  const results: LevelResult[] = [];
  for (const concurrency of levels) {
    const levelRecords: RequestRecord[] = [];
    const perRepetition: number[] = [];
    for (let repetition = 0; repetition < repetitions; repetition++) {
      const target: StudyTarget =
        options.gatewayUrl !== undefined
          ? externalTarget(options.gatewayUrl)
          : await StudyEnvironment.start({
              engines: SMALL_ENGINES,
              timeScale: options.timeScale,
              seed: options.seed,
            });
      if (target instanceof StudyEnvironment && configs.length === 0) configs.push(target.config);
      try {
        const sessions = generateWorkload({
          seed: options.seed + repetition,
          sessions: Math.max(options.quick ? 4 : 8, 2 * concurrency),
          turns: 2,
          systemPromptChars: 3000,
          sharedSystemPrompt: options.sharedSystemPrompt ?? false,
          userChars: 300,
          maxTokens: 256,
          toolCallRate: 0,
          thinkTimeMs: 0,
          idPrefix: `${options.runId}-c${concurrency}-r${repetition}`,
        });
        const run = await runCondition(
          `saturation:c${concurrency}/r${repetition + 1}`,
          `c${concurrency}`,
          sessions,
          concurrency,
          target,
          options.progress,
        );
        perRepetition.push(analyze(run, target.timeScale).e2eP50Seconds);
        levelRecords.push(...run);
      } finally {
        await target.close();
      }
    }
    const scale = options.gatewayUrl === undefined ? options.timeScale : 1;
    const numbers = analyze(levelRecords, scale);
    records.push(...levelRecords);
    results.push({
      concurrency,
      repetitions,
      requests: numbers.requests,
      failed: numbers.failed,
      bindingHitRate: numbers.bindingHitRate,
      prefixCacheHitRate: numbers.prefixCacheHitRate,
      e2eP50Seconds: numbers.e2eP50Seconds,
      e2eP95Seconds: numbers.e2eP95Seconds,
      ttftP50Seconds: numbers.ttftP50Seconds,
      e2eP50PerRepetition: perRepetition,
    });
  }
  return {
    study: "saturation",
    title: "Saturation study (the original's Study 1, on simulated engines)",
    description:
      `Two qwen2.5-7b engines in the small tier; 2-turn sessions with a 3,000-character system prompt ${options.sharedSystemPrompt ? "shared by all sessions" : "of each session's own"}, ` +
      `streaming, max_tokens 256; concurrency ${levels.join(", ")}; ${repetitions} repetition(s) per level on fresh engines.`,
    seed: options.seed,
    timeScale: options.timeScale,
    configs,
    records,
    tables: [
      {
        title: "Per concurrency level (latencies in simulated seconds)",
        columns: [
          "concurrency",
          "requests",
          "failed",
          "binding hit rate",
          "prefix-cache hit rate",
          "TTFT p50",
          "E2E p50",
          "E2E p95",
          "E2E p50 range over repetitions",
        ],
        rows: results.map((r) => [
          r.concurrency,
          r.requests,
          r.failed,
          pct(r.bindingHitRate),
          pct(r.prefixCacheHitRate),
          sec(r.ttftP50Seconds),
          sec(r.e2eP50Seconds),
          sec(r.e2eP95Seconds),
          `${sec(Math.min(...r.e2eP50PerRepetition))}-${sec(Math.max(...r.e2eP50PerRepetition))}`,
        ]),
      },
    ],
    charts: [
      {
        file: "saturation-e2e.svg",
        caption: "E2E p50 and p95 by concurrency (simulated seconds)",
        svg: lineChart({
          title: "E2E latency by concurrency",
          xLabel: "concurrency",
          yLabel: "seconds (simulated)",
          series: [
            { name: "E2E p50", points: results.map((r) => ({ x: r.concurrency, y: r.e2eP50Seconds })) },
            { name: "E2E p95", points: results.map((r) => ({ x: r.concurrency, y: r.e2eP95Seconds })) },
          ],
          yMin: 0,
        }),
      },
    ],
    checks: results.flatMap((r) => [
      {
        claim: `c=${r.concurrency}: no failed request`,
        passed: r.failed === 0,
        detail: `${r.failed}/${r.requests}`,
      },
      {
        claim: `c=${r.concurrency}: binding hit rate 50% (2-turn sessions)`,
        passed: Math.abs(r.bindingHitRate - 0.5) < 1e-9,
        detail: pct(r.bindingHitRate),
      },
    ]),
    notes: [
      `Median of the per-repetition E2E p50 at the highest level: ${sec(percentile(results.at(-1)?.e2eP50PerRepetition ?? [], 50))} s.`,
    ],
    data: Object.fromEntries(results.map((r) => [`c${r.concurrency}`, r])),
  };
}
