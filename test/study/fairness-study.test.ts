// The fairness study: its numbers on hand-made records, and a quick run end to end on simulated engines.
import { describe, expect, it } from "vitest";
import type { FairnessRecord, FairnessRun } from "../../src/study/fairness-runner.js";
import { silentProgress } from "../../src/study/progress.js";
import { fairnessNumbers, runFairnessStudy } from "../../src/study/studies/fairness.js";

function record(over: Partial<FairnessRecord>): FairnessRecord {
  return {
    status: 200,
    ok: true,
    ttftMs: 10,
    e2eMs: 100,
    reply: "",
    backend: "small-0",
    tier: "small",
    affinityHit: true,
    reason: "affinity_hit",
    attempts: 1,
    queueWaitMs: 0,
    promptTokens: 10,
    cachedTokens: 0,
    completionTokens: 10,
    condition: "c",
    sessionId: "s",
    turn: 1,
    startMs: 0,
    agent: "interactive-0",
    kind: "interactive",
    ...over,
  };
}

describe("fairness numbers", () => {
  it("counts throughput inside the window only, program latency per task, Jain over agents' tokens", () => {
    const run: FairnessRun = {
      records: [
        record({ ttftMs: 20 }),
        record({ agent: "batch-0", kind: "batch", ttftMs: null, completionTokens: 30, startMs: 100 }),
        record({ agent: "batch-0", kind: "batch", ttftMs: null, completionTokens: 99, startMs: 950 }),
      ],
      programs: [
        { agent: "interactive-0", task: 0, startMs: 0, endMs: 500 },
        { agent: "interactive-0", task: 1, startMs: 500, endMs: 1000 },
      ],
      windowStartMs: 0,
      windowEndMs: 1000,
      windowTokens: undefined,
    };
    const n = fairnessNumbers(run, 10); // 1000 wall ms = 10 simulated s
    expect(n.totalTokensPerSecond).toBe(4); // 10 + 30 tokens in the window, the last call ends after it
    expect(n.batchTokensPerSecond).toBe(3);
    expect(n.programP50Seconds).toBe(5);
    expect(n.interactiveTtftP50Seconds).toBeCloseTo(0.2, 9);
    expect(n.jain).toBeCloseTo(1600 / (2 * 1000), 9); // (10 + 30)^2 / (2 * (100 + 900))
  });
});

describe("the fairness study, quick", () => {
  it("runs every policy beside the unloaded baseline, with no failed request", async () => {
    const result = await runFairnessStudy({
      seed: 1,
      timeScale: 20,
      quick: true,
      runId: "fairness-test",
      progress: silentProgress,
    });
    expect(Object.keys(result.data)).toEqual([
      "unloaded",
      "fifo",
      "fair",
      "least-attained",
      "least-attained-cap",
    ]);
    expect(result.checks.filter((c) => c.claim.endsWith("no failed request")).every((c) => c.passed)).toBe(
      true,
    );
    expect(result.tables[0]!.rows).toHaveLength(5);
    const loaded = result.data["fifo"] as { batchTokensPerSecond: number; requests: number };
    expect(loaded.batchTokensPerSecond).toBeGreaterThan(0);
  });
});
