// The coding-agents study: its workload's shape, its numbers on hand-made records, and a quick run end to end.
import { describe, expect, it } from "vitest";
import { SeededRandom } from "../../src/core/random.js";
import type { BurstWindow, CodingRecord } from "../../src/study/coding-runner.js";
import {
  burstSize,
  generateCodingWorkload,
  type CodingWorkloadSpec,
} from "../../src/study/coding-workload.js";
import { silentProgress } from "../../src/study/progress.js";
import {
  agentsNumbers,
  agentsVerdict,
  runAgentsStudy,
  type AgentsNumbers,
} from "../../src/study/studies/agents.js";

const SPEC: CodingWorkloadSpec = {
  seed: 7,
  sessions: 20,
  turns: { min: 10, max: 14 },
  systemPromptChars: 5000,
  subagentPromptChars: 2000,
  toolResultChars: { min: 100, max: 400 },
  replyTokens: { min: 5, max: 10 },
  burstShare: 0.5,
  burstSize: { median: 7, p90: 50, min: 7, max: 50 },
  subagentTurns: { min: 2, max: 4 },
  thinkSeconds: { short: { min: 1, max: 8 }, long: { min: 30, max: 90 }, longShare: 0.1 },
  subagentThinkSeconds: { min: 1, max: 5 },
  idPrefix: "run",
};

describe("coding-agent workload", () => {
  it("replays the same sessions for the same seed; only the id prefix differs between conditions", () => {
    const a = generateCodingWorkload(SPEC);
    const b = generateCodingWorkload({ ...SPEC, idPrefix: "other" });
    expect(b.map((s) => s.calls)).toEqual(a.map((s) => s.calls));
    expect(b.map((s) => s.burst)).toEqual(a.map((s) => s.burst));
    expect(a[0]!.id).toBe("run-000");
    expect(b[0]!.id).toBe("other-000");
  });

  it("shares one system prompt between sessions, gives sub-agents their own, and bursts in the middle third", () => {
    const sessions = generateCodingWorkload(SPEC);
    expect(new Set(sessions.map((s) => s.systemPrompt)).size).toBe(1);
    expect(sessions[0]!.systemPrompt).toHaveLength(SPEC.systemPromptChars);
    const bursting = sessions.filter((s) => s.burst !== undefined);
    expect(bursting.length).toBeGreaterThan(0);
    expect(bursting.length).toBeLessThan(sessions.length);
    for (const s of bursting) {
      const burst = s.burst!;
      expect(burst.systemPrompt).not.toBe(s.systemPrompt);
      expect(burst.afterCall).toBeGreaterThanOrEqual(Math.floor(s.calls.length / 3));
      expect(burst.afterCall).toBeLessThan(s.calls.length);
      for (const sub of burst.subagents) {
        expect(sub.calls[0]!.message.kind).toBe("user");
        expect(sub.calls.length).toBeGreaterThanOrEqual(2);
      }
    }
    for (const s of sessions) {
      expect(s.calls[0]!.thinkMs).toBe(0);
      expect(s.calls[0]!.message.kind).toBe("user");
    }
  });

  it("draws burst sizes with a median near 7, a tail toward 50, clamped to the range", () => {
    const random = new SeededRandom(1);
    const sizes = Array.from({ length: 4000 }, () => burstSize(random, SPEC.burstSize)).sort((x, y) => x - y);
    expect(sizes[0]).toBe(7);
    expect(sizes.at(-1)).toBe(50);
    const median = sizes[2000]!;
    expect(median).toBeGreaterThanOrEqual(7);
    expect(median).toBeLessThanOrEqual(9);
    // Half the draws fall below the median 7 and are clamped to it; the 90th percentile is near 50.
    expect(sizes[3600]!).toBeGreaterThanOrEqual(35);
  });
});

function record(partial: Partial<CodingRecord> & Pick<CodingRecord, "sessionId" | "startMs">): CodingRecord {
  return {
    status: 200,
    ok: true,
    ttftMs: 100,
    e2eMs: 200,
    reply: "",
    backend: "a",
    tier: "small",
    affinityHit: true,
    reason: "affinity_hit",
    attempts: 1,
    queueWaitMs: 0,
    promptTokens: 100,
    cachedTokens: 90,
    completionTokens: 10,
    condition: "c",
    turn: 1,
    thread: "main",
    ...partial,
  };
}

describe("agents numbers", () => {
  it("counts engines per session, the busiest engine, and the other sessions' calls during bursts", () => {
    const records = [
      record({ sessionId: "s1", startMs: 0, backend: "a" }),
      record({ sessionId: "s1", startMs: 10, backend: "a", ttftMs: 100 }),
      record({ sessionId: "s1", startMs: 20, backend: "b", thread: "subagent", cachedTokens: 0 }),
      record({ sessionId: "s2", startMs: 15, backend: "c", ttftMs: 400 }),
      record({ sessionId: "s2", startMs: 40, backend: "c", ttftMs: 100 }),
      record({ sessionId: "s3", startMs: 16, backend: "a", status: 502, ok: false }),
    ];
    const bursts: BurstWindow[] = [{ sessionId: "s1", size: 1, startMs: 12, endMs: 30 }];
    const n: AgentsNumbers = agentsNumbers(records, bursts, 1);
    expect(n.requests).toBe(6);
    expect(n.failed).toBe(1);
    expect(n.subagentRequests).toBe(1);
    expect(n.prefixCacheHitRate).toBeCloseTo(360 / 500);
    expect(n.mainPrefixCacheHitRate).toBeCloseTo(0.9);
    expect(n.enginesPerSessionMean).toBe(1);
    expect(n.enginesPerSessionWithSubagents).toBe(1.5);
    expect(n.busiestEngineShare).toBeCloseTo(2 / 5);
    // Only s2's call at 15 ms started inside s1's burst; s1's own calls never count against its burst.
    expect(n.duringBurstRequests).toBe(1);
    expect(n.duringBurstTtftP99Seconds).toBeCloseTo(0.4);
    expect(n.duringBurstP99OverP50).toBeCloseTo(4);
  });
});

describe("agents verdict", () => {
  const numbers = (name: string, label: string, recomputed: number, rate: number) => ({
    ...agentsNumbers([], [], 1),
    name,
    label,
    recomputedPromptTokens: recomputed,
    prefixCacheHitRate: rate,
  });

  it("says whether the signal saved or cost recomputed tokens, and how many goals were missed", () => {
    const verdict = agentsVerdict(
      [numbers("client_signals", "signal", 1_000, 0.9), numbers("least_loaded", "least-loaded", 11_000, 0.5)],
      [
        { claim: "goal: a", passed: true, detail: "" },
        { claim: "goal: b", passed: false, detail: "" },
        { claim: "no failed request", passed: true, detail: "" },
      ],
    );
    expect(verdict).toBe(
      "The client's session signal served 90.0% of prompt tokens from the cache: 10,000 fewer prompt tokens " +
        "recomputed than least-loaded (90.9%). 1 of 2 goals not met (see the checks).",
    );
    const worse = agentsVerdict(
      [numbers("client_signals", "signal", 3_000, 0.4), numbers("prefix_only", "prefix", 2_000, 0.6)],
      [],
    );
    expect(worse).toContain("1,000 MORE prompt tokens recomputed than prefix (50.0%)");
    expect(agentsVerdict([numbers("prefix_only", "prefix", 1, 1)], [])).toBeUndefined();
  });
});

describe("agents study (quick)", () => {
  it("runs the three conditions on the same workload; the client's signal keeps each session on one engine", async () => {
    const result = await runAgentsStudy({
      seed: 42,
      timeScale: 20,
      quick: true,
      runId: "test",
      progress: silentProgress,
    });
    const data = result.data as Record<string, AgentsNumbers>;
    expect(Object.keys(data)).toEqual(["client_signals", "prefix_only", "least_loaded"]);
    for (const numbers of Object.values(data)) {
      expect(numbers.failed).toBe(0);
      expect(numbers.requests).toBe(data["client_signals"]!.requests);
      expect(numbers.subagentRequests).toBeGreaterThan(0);
    }
    expect(data["client_signals"]!.enginesPerSessionMax).toBe(1);
    // Least-loaded spreads a session's calls over the engines.
    expect(data["least_loaded"]!.enginesPerSessionMean).toBeGreaterThan(1);
    const invariants = result.checks.filter((c) => !c.claim.startsWith("goal:"));
    expect(invariants.filter((c) => !c.passed)).toEqual([]);
    expect(result.checks.filter((c) => c.claim.startsWith("goal:")).length).toBe(4);
    // The verdict compares prompt tokens recomputed (one base: the same workload) and says how the goals went.
    expect(result.verdict).toMatch(
      /^The client's session signal served \d+\.\d% of prompt tokens from the cache: /,
    );
    expect(result.verdict).toMatch(/prompt tokens recomputed than prefix placement only/);
    expect(result.verdict).toMatch(/(All 4 goals met\.|\d of 4 goals not met \(see the checks\)\.)$/);
    // Charts name the conditions in words.
    for (const chart of result.charts) {
      expect(chart.svg).not.toMatch(/>(client_signals|prefix_only|least_loaded)</);
      expect(chart.svg).toContain("prefix placement only");
    }
  }, 60_000);
});
