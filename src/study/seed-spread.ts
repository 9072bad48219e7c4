// `study --seeds N`: the same study under N seeds, and how far its numbers move between them (min, median, max).
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { analyze, count, pct, sec } from "./analysis.js";
import { checkOutcome, markdownTable } from "./report-writer.js";
import type { StudyResult, Table } from "./result.js";
import { percentile } from "./stats.js";

/** min / median / max of one number over the seeds, each written by `format`; "-" where no seed had it. */
function spreadText(values: readonly number[], format: (v: number) => string): string {
  const finite = values.filter((v) => Number.isFinite(v));
  if (finite.length === 0) return "-";
  const min = Math.min(...finite);
  const max = Math.max(...finite);
  return `${format(min)} / ${format(percentile(finite, 50))} / ${format(max)}`;
}

/**
 * Per condition (as the runs name them): engine reuse, TTFT and failures, as min / median / max over the seeds,
 * and TTFT over every seed's calls taken together. One run's p50 of a time-scaled simulation moves by tenths of a
 * second with the machine; pooled over the seeds' calls, a small difference between two conditions is told apart
 * from that scatter sooner than by comparing per-seed medians (docs/kv-events.md, ninth round).
 */
export function seedSpreadTable(runs: readonly StudyResult[]): Table {
  const conditions = [...new Set(runs.flatMap((run) => run.records.map((r) => r.condition)))];
  return {
    title: `Spread over ${runs.length} seeds (${runs.map((r) => r.seed).join(", ")}): min / median / max`,
    columns: [
      "condition",
      "engine prefix-cache reuse",
      "TTFT p50 (s)",
      "TTFT p95 (s)",
      "failed requests",
      "TTFT p50 / p95, all seeds' calls pooled (s)",
    ],
    rows: conditions.map((condition) => {
      const numbers = runs.map((run) =>
        analyze(
          run.records.filter((r) => r.condition === condition),
          run.timeScale,
        ),
      );
      // Every run of one invocation has the same time scale (the command's option).
      const pooled = analyze(
        runs.flatMap((run) => run.records.filter((r) => r.condition === condition)),
        runs[0]?.timeScale ?? 1,
      );
      return [
        condition,
        spreadText(
          numbers.map((n) => (n.promptTokens === 0 ? Number.NaN : n.prefixCacheHitRate)),
          pct,
        ),
        spreadText(
          numbers.map((n) => n.ttftP50Seconds),
          sec,
        ),
        spreadText(
          numbers.map((n) => n.ttftP95Seconds),
          sec,
        ),
        spreadText(
          numbers.map((n) => n.failed),
          count,
        ),
        `${sec(pooled.ttftP50Seconds)} / ${sec(pooled.ttftP95Seconds)}`,
      ];
    }),
  };
}

/** Each claim the runs checked, and in how many seeds it held (a goal met in 2 of 3 seeds is a finding too). */
export function seedCheckTable(runs: readonly StudyResult[]): Table {
  const claims = [...new Set(runs.flatMap((run) => run.checks.map((c) => c.claim)))];
  return {
    title: "Checks over the seeds",
    columns: ["check", "held in", "per seed"],
    rows: claims.map((claim) => {
      const seen = runs.flatMap((run) => {
        const check = run.checks.find((c) => c.claim === claim);
        return check === undefined ? [] : [{ seed: run.seed, check }];
      });
      return [
        claim,
        `${seen.filter((s) => s.check.passed).length} of ${seen.length}`,
        seen.map((s) => `seed ${s.seed}: ${checkOutcome(s.check)} (${s.check.detail})`).join("; "),
      ];
    }),
  };
}

/** Writes DIR/<id>-seeds<N>/spread.md; returns what the terminal shows of it (the tables and the file's path). */
export async function writeSeedSpread(
  outRoot: string,
  runs: readonly StudyResult[],
  id: string,
): Promise<{ dir: string; text: string }> {
  const dir = join(outRoot, `${id}-seeds${runs.length}`);
  await mkdir(dir, { recursive: true });
  const tables = [seedSpreadTable(runs), seedCheckTable(runs)];
  const body = tables.map((t) => `## ${t.title}\n\n${markdownTable(t)}\n`).join("\n");
  await writeFile(join(dir, "spread.md"), `# ${runs[0]!.title}: ${runs.length} seeds\n\n${body}`);
  return { dir, text: `\n${body}\nspread: ${dir}/spread.md\n` };
}
