// What a study says on the terminal: progress lines off a TTY, numbers one way, the verdict, findings vs errors,
// and the spread over seeds.
import { describe, expect, it } from "vitest";
import { count } from "../../src/study/analysis.js";
import { studyExitCode, studyOutcome } from "../../src/study/command.js";
import { plainProgress } from "../../src/study/progress.js";
import { checkLine, markdownTable } from "../../src/study/report-writer.js";
import type { StudyResult } from "../../src/study/result.js";
import { seedCheckTable, seedSpreadTable } from "../../src/study/seed-spread.js";
import type { RequestRecord } from "../../src/study/session-runner.js";
import { studyRecord } from "./records.js";

function record(condition: string, turn: number, ttftMs: number, cachedTokens: number): RequestRecord {
  return studyRecord(condition, turn, { ttftMs, e2eMs: ttftMs * 2, promptTokens: 100, cachedTokens });
}

function result(seed: number, records: RequestRecord[], passed: boolean): StudyResult {
  return {
    study: "x",
    title: "X study",
    description: "",
    verdict: `seed ${seed} says so.`,
    seed,
    timeScale: 1,
    configs: [],
    records,
    tables: [{ title: "T", columns: ["a", "b"], rows: [["r", 10504080]] }],
    charts: [],
    checks: [
      { claim: "no failed request", passed: true, detail: "0/2" },
      { claim: "goal: reuse above 90%", passed, detail: passed ? "95%" : "50%" },
    ],
    notes: [],
    data: {},
  };
}

describe("study output", () => {
  it("prints a line when a step starts, at each quarter and at its end, off a TTY", () => {
    const lines: string[] = [];
    const progress = plainProgress((line) => lines.push(line));
    progress.start("affinity:on", 8);
    for (let i = 0; i < 8; i++) progress.tick(i === 5);
    progress.done();
    expect(lines).toEqual([
      "affinity:on: started, 8 to go\n",
      "affinity:on: 2/8\n",
      "affinity:on: 4/8\n",
      "affinity:on: 6/8 (1 failed)\n",
      "affinity:on: done, 8/8 (1 failed)\n",
    ]);
  });

  it("writes every count in a table with thousands separators", () => {
    expect(count(10504080)).toBe("10,504,080");
    expect(count(Number.NaN)).toBe("-");
    expect(markdownTable({ title: "t", columns: ["n"], rows: [[92688], ["x"]] })).toContain("| 92,688 |");
  });

  it("shows an unmet goal as a finding and any other claim as PASS or FAIL", () => {
    expect(checkLine({ claim: "goal: reuse above 90%", passed: false, detail: "50%" })).toBe(
      "goal NOT met: reuse above 90% (50%)",
    );
    expect(checkLine({ claim: "goal: reuse above 90%", passed: true, detail: "95%" })).toBe(
      "goal met: reuse above 90% (95%)",
    );
    expect(checkLine({ claim: "no failed request", passed: false, detail: "1/2" })).toBe(
      "FAIL: no failed request (1/2)",
    );
  });

  it("leads with the verdict and says that checks that did not hold are findings", () => {
    const text = studyOutcome(result(42, [], false), "out/x-1");
    expect(text.indexOf("Verdict: seed 42 says so.")).toBeLessThan(text.indexOf("| 10,504,080 |"));
    expect(text).toContain("goal NOT met: reuse above 90% (50%)");
    expect(text).toContain("1 of 2 checks did not hold: findings of this run, not errors");
    expect(text).toContain("report: out/x-1/report.md");
    expect(studyOutcome(result(42, [], true), "d")).toContain("All 2 checks held.");
  });

  it("exits 0 when the studies ran, whatever they found; --strict exits 1 when a check did not hold", () => {
    const met = result(1, [], true);
    const unmet = result(2, [], false);
    expect(studyExitCode([met, unmet], false)).toBe(0);
    expect(studyExitCode([met, unmet], true)).toBe(1);
    expect(studyExitCode([met], true)).toBe(0);
  });

  it("reports min / median / max per condition over the seeds, TTFT pooled, and in how many seeds each check held", () => {
    const runs = [
      result(1, [record("on", 1, 100, 0), record("on", 2, 100, 100)], true),
      result(2, [record("on", 1, 300, 0), record("on", 2, 300, 50)], false),
      result(3, [record("on", 1, 200, 0), record("on", 2, 200, 80)], true),
    ];
    const spread = seedSpreadTable(runs);
    expect(spread.title).toBe("Spread over 3 seeds (1, 2, 3): min / median / max");
    // Reuse 25%, 50%, 40%; TTFT p50 0.1, 0.3, 0.2 s.
    expect(spread.rows).toEqual([
      [
        "on",
        "25.0% / 40.0% / 50.0%",
        "0.100 / 0.200 / 0.300",
        expect.any(String),
        "0 / 0 / 0",
        "0.200 / 0.300",
      ],
    ]);
    const checks = seedCheckTable(runs);
    expect(checks.rows[0]!.slice(0, 2)).toEqual(["no failed request", "3 of 3"]);
    expect(checks.rows[1]!.slice(0, 2)).toEqual(["goal: reuse above 90%", "2 of 3"]);
    expect(checks.rows[1]![2]).toContain("seed 2: goal NOT met (50%)");
  });
});
