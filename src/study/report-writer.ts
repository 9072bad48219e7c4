// Writes a study's run directory: summary.json, requests.csv, report.md and the SVG charts.
import { createHash } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { cpus, totalmem } from "node:os";
import { join } from "node:path";
import { count } from "./analysis.js";
import type { Check, StudyResult, Table } from "./result.js";
import type { RequestRecord } from "./session-runner.js";

export interface RunInfo {
  runId: string;
  command: string;
  startedAt: Date;
  durationSeconds: number;
}

export function machineDescription(): Record<string, unknown> {
  const cpuList = cpus();
  return {
    cpus: cpuList.length,
    cpuModel: cpuList[0]?.model ?? "unknown",
    memoryGiB: Math.round(totalmem() / 2 ** 30),
    platform: process.platform,
    arch: process.arch,
  };
}

export function configHash(configs: readonly unknown[]): string {
  return createHash("sha256").update(JSON.stringify(configs)).digest("hex").slice(0, 16);
}

const CSV_COLUMNS: (keyof RequestRecord)[] = [
  "condition",
  "sessionId",
  "turn",
  "startMs",
  "status",
  "ok",
  "ttftMs",
  "e2eMs",
  "backend",
  "tier",
  "affinityHit",
  "reason",
  "attempts",
  "queueWaitMs",
  "promptTokens",
  "cachedTokens",
  "completionTokens",
  "error",
  // The gateway's prediction of cachedTokens (KV events' receipts; empty without one), last so that older
  // readers of the file keep their columns.
  "expectedCachedTokens",
];

function csvCell(value: unknown): string {
  if (value === null || value === undefined) return "";
  const text = typeof value === "number" ? String(Math.round(value * 1000) / 1000) : String(value);
  return /[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

export function requestsCsv(records: readonly RequestRecord[]): string {
  const lines = [CSV_COLUMNS.join(",")];
  for (const record of records) lines.push(CSV_COLUMNS.map((column) => csvCell(record[column])).join(","));
  return lines.join("\n") + "\n";
}

/** A check as reports and the terminal show it: a goal is met or not (a finding), any other claim passes or fails. */
export function checkLine(check: Check): string {
  const claim = check.claim.startsWith(GOAL_PREFIX) ? check.claim.slice(GOAL_PREFIX.length) : check.claim;
  return `${checkOutcome(check)}: ${claim} (${check.detail})`;
}

/** "goal met" / "goal NOT met" for a goal, "PASS" / "FAIL" for any other claim. */
export function checkOutcome(check: Check): string {
  if (check.claim.startsWith(GOAL_PREFIX)) return check.passed ? "goal met" : "goal NOT met";
  return check.passed ? "PASS" : "FAIL";
}

/** Claims that open with this are goals the study measures against, not properties it asserts. */
export const GOAL_PREFIX = "goal: ";

export function markdownTable(table: Table): string {
  // Numbers one way in every table: counts with thousands separators.
  const escape = (cell: string | number): string =>
    (typeof cell === "number" ? count(cell) : cell).replace(/\|/g, "\\|");
  return [
    `| ${table.columns.map(escape).join(" | ")} |`,
    `| ${table.columns.map(() => "---").join(" | ")} |`,
    ...table.rows.map((row) => `| ${row.map(escape).join(" | ")} |`),
  ].join("\n");
}

export function reportMarkdown(result: StudyResult, run: RunInfo): string {
  const machine = machineDescription();
  const lines = [
    `# ${result.title}`,
    "",
    ...(result.verdict === undefined ? [] : [`**Verdict:** ${result.verdict}`, ""]),
    result.description,
    "",
    `Run \`${run.runId}\`, ${run.startedAt.toISOString()}, ${run.durationSeconds.toFixed(1)} s wall clock. ` +
      `Seed ${result.seed}, time scale ${result.timeScale} (latencies are engine time: simulated time for simulated engines), config hash ` +
      `${configHash(result.configs)}. Machine: ${String(machine["cpus"])} x ${String(machine["cpuModel"])}, ` +
      `${String(machine["memoryGiB"])} GiB, Node ${process.version}.`,
    "",
    `Reproduce: \`${run.command}\``,
    "",
  ];
  for (const table of result.tables) lines.push(`## ${table.title}`, "", markdownTable(table), "");
  if (result.checks.length > 0) {
    lines.push("## Checks", "");
    for (const check of result.checks) lines.push(`- ${checkLine(check)}`);
    lines.push("");
  }
  for (const chart of result.charts)
    lines.push(`![${chart.caption}](${chart.file})`, "", `*${chart.caption}*`, "");
  if (result.notes.length > 0) lines.push("## Notes", "", ...result.notes.map((note) => `- ${note}`), "");
  return lines.join("\n");
}

export function summaryJson(result: StudyResult, run: RunInfo): string {
  return JSON.stringify(
    {
      study: result.study,
      runId: run.runId,
      command: run.command,
      startedAt: run.startedAt.toISOString(),
      durationSeconds: run.durationSeconds,
      seed: result.seed,
      timeScale: result.timeScale,
      configHash: configHash(result.configs),
      node: process.version,
      machine: machineDescription(),
      verdict: result.verdict ?? null,
      checks: result.checks,
      notes: result.notes,
      results: result.data,
    },
    (_key, value: unknown) => (typeof value === "number" && !Number.isFinite(value) ? null : value),
    2,
  );
}

/** Writes every file of the run; returns the directory. */
export async function writeRun(outRoot: string, result: StudyResult, run: RunInfo): Promise<string> {
  const dir = join(outRoot, run.runId);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, "summary.json"), summaryJson(result, run) + "\n");
  await writeFile(join(dir, "requests.csv"), requestsCsv(result.records));
  await writeFile(join(dir, "report.md"), reportMarkdown(result, run));
  for (const chart of result.charts) await writeFile(join(dir, chart.file), chart.svg);
  return dir;
}
