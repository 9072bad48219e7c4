// The report writer: CSV quoting, markdown tables, and a run directory with every file.
import { readFile, readdir } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { markdownTable, requestsCsv, writeRun } from "../../src/study/report-writer.js";
import type { StudyResult } from "../../src/study/result.js";
import type { RequestRecord } from "../../src/study/session-runner.js";
import { useTempDirs } from "../helpers/temp-dir.js";

const record: RequestRecord = {
  condition: "on",
  sessionId: "s-1",
  turn: 2,
  startMs: 12.3456,
  status: 200,
  ok: true,
  ttftMs: 4.5,
  e2eMs: 100,
  reply: "ignored in the csv",
  backend: "small-0",
  tier: "small",
  affinityHit: true,
  reason: "affinity_hit",
  attempts: 1,
  queueWaitMs: 0,
  promptTokens: 800,
  cachedTokens: 784,
  completionTokens: 16,
};

const result: StudyResult = {
  study: "affinity",
  title: "A title",
  description: "What ran.",
  seed: 42,
  timeScale: 5,
  configs: [{ a: 1 }],
  records: [record, { ...record, turn: 3, ok: false, error: 'engine said "no", then, died', ttftMs: null }],
  tables: [{ title: "Numbers", columns: ["a", "b|c"], rows: [[1, "x|y"]] }],
  charts: [{ file: "c.svg", caption: "A chart", svg: "<svg xmlns='http://www.w3.org/2000/svg'/>" }],
  checks: [
    { claim: "works", passed: true, detail: "yes" },
    { claim: "fails", passed: false, detail: "no" },
  ],
  notes: ["a note"],
  data: { on: { hitRate: 0.8333, nan: Number.NaN } },
};

const tempDir = useTempDirs();

describe("report writer", () => {
  it("writes requests.csv with a header and quotes cells that need it", () => {
    const lines = requestsCsv(result.records).trim().split("\n");
    expect(lines[0]).toBe(
      "condition,sessionId,turn,startMs,status,ok,ttftMs,e2eMs,backend,tier,affinityHit,reason,attempts,queueWaitMs,promptTokens,cachedTokens,completionTokens,error,expectedCachedTokens",
    );
    expect(lines[1]).toBe(
      "on,s-1,2,12.346,200,true,4.5,100,small-0,small,true,affinity_hit,1,0,800,784,16,,",
    );
    expect(lines[2]).toContain(',"engine said ""no"", then, died"');
    expect(lines[2]).toContain("200,false,,100");
  });

  it("renders markdown tables with pipes escaped", () => {
    expect(markdownTable(result.tables[0]!)).toBe("| a | b\\|c |\n| --- | --- |\n| 1 | x\\|y |");
  });

  it("writes summary.json, requests.csv, report.md and the charts into the run directory", async () => {
    const root = await tempDir("agent-serve-report-");
    const dir = await writeRun(root, result, {
      runId: "affinity-test",
      command: "agent-serve study affinity",
      startedAt: new Date("2026-12-02T10:00:00Z"),
      durationSeconds: 12.5,
    });
    expect((await readdir(dir)).sort()).toEqual(["c.svg", "report.md", "requests.csv", "summary.json"]);
    const summary = JSON.parse(await readFile(join(dir, "summary.json"), "utf8")) as Record<string, unknown>;
    expect(summary).toMatchObject({
      study: "affinity",
      runId: "affinity-test",
      seed: 42,
      timeScale: 5,
      node: process.version,
    });
    expect(summary["configHash"]).toMatch(/^[0-9a-f]{16}$/);
    expect((summary["machine"] as Record<string, unknown>)["cpus"]).toBeGreaterThan(0);
    expect(summary["results"]).toEqual({ on: { hitRate: 0.8333, nan: null } });
    const report = await readFile(join(dir, "report.md"), "utf8");
    expect(report).toContain("# A title");
    expect(report).toContain("Reproduce: `agent-serve study affinity`");
    expect(report).toContain("- PASS: works (yes)");
    expect(report).toContain("- FAIL: fails (no)");
    expect(report).toContain("![A chart](c.svg)");
    expect(report).toContain("- a note");
  });
});
