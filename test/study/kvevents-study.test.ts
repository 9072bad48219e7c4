// The KV-events study: its numbers and checks on hand-made records, and a quick run end to end (real simulated
// engines publishing KV events over ZMQ, gateway processes, 1 and 3 replicas).
import { describe, expect, it } from "vitest";
import type { CodingRecord } from "../../src/study/coding-runner.js";
import { kvStudyNumbers, predictionError } from "../../src/study/kv-events-numbers.js";
import { silentProgress } from "../../src/study/progress.js";
import {
  kvEventsChecks,
  kvEventsVerdict,
  runKvEventsStudy,
  kvSessions,
  selectConditions,
  sendsSignal,
  type KvCondition,
  type Row,
} from "../../src/study/studies/kvevents.js";
import { redisAvailable } from "../helpers/redis-server.js";
import { studyRecord } from "./records.js";

function call(fields: Partial<CodingRecord>): CodingRecord {
  return { ...studyRecord("c", 2), thread: "main", ...fields };
}

describe("the KV-events study's numbers", () => {
  it("counts a prediction right within 2% of the prompt, and says which way a wrong one was off", () => {
    const records = [
      call({ promptTokens: 1000, cachedTokens: 800, expectedCachedTokens: 800 }),
      call({ promptTokens: 1000, cachedTokens: 800, expectedCachedTokens: 816 }), // 1.6%: right
      call({ promptTokens: 1000, cachedTokens: 800, expectedCachedTokens: 1000 }), // over
      call({ promptTokens: 1000, cachedTokens: 800, expectedCachedTokens: 0 }), // under
      call({ promptTokens: 1000, cachedTokens: 0, expectedCachedTokens: null }), // no prediction
      call({ status: 503, ok: false, promptTokens: 0, cachedTokens: 0 }),
    ];
    expect(predictionError(records[2]!)).toBeCloseTo(0.2);
    expect(predictionError(records[4]!)).toBeUndefined();
    const n = kvStudyNumbers(records, 10);
    expect(n).toMatchObject({
      requests: 6,
      failed: 1,
      promptTokens: 5000,
      recomputedTokens: 5000 - 3200,
      predictedTurns: 4,
      predictionWithinTolerance: 0.5,
      predictedOver: 1,
      predictedUnder: 1,
    });
    expect(n.cachedShare).toBeCloseTo(3200 / 5000);
    expect(n.predictionErrorMax).toBeCloseTo(0.8);
    // 100 ms of wall time at time scale 10 is a second of engine time.
    expect(n.ttftP50Seconds).toBeCloseTo(1);
  });

  it("gives the sessions' own calls and the sub-agents' calls a TTFT of their own", () => {
    const records = [
      call({ ttftMs: 500 }),
      call({ ttftMs: 700 }),
      call({ thread: "subagent", ttftMs: 100 }),
      call({ thread: "subagent", ttftMs: 100 }),
      call({ thread: "subagent", ttftMs: 300 }),
    ];
    const n = kvStudyNumbers(records, 10);
    expect(n.subagentRequests).toBe(3);
    expect(n.mainTtftP99Seconds).toBeCloseTo(7, 1);
    expect(n.subagentTtftP50Seconds).toBeCloseTo(1);
    expect(n.subagentTtftP99Seconds).toBeCloseTo(3, 1);
    // The all-call p50 falls on a sub-agent's call when they are most of the calls.
    expect(n.ttftP50Seconds).toBeCloseTo(3);
  });

  it("flags event-driven placement that reuses less than approximate, and a prediction right on too few calls", () => {
    const base = kvStudyNumbers([call({ expectedCachedTokens: 800 })], 1);
    const row = (placement: "approximate" | "events", cachedShare: number, within: number) => ({
      ...base,
      name: `tight-r1-${placement}`,
      pressure: "tight" as const,
      replicas: 1 as const,
      placement,
      store: "memory" as const,
      cachedShare,
      recomputedTokens: Math.round((1 - cachedShare) * 1000),
      predictionWithinTolerance: within,
      signalled: base,
      unsignalled: base,
    });
    const passed = (rows: ReturnType<typeof row>[]) =>
      Object.fromEntries(kvEventsChecks(rows).map((c) => [c.claim.replace(/:.*?: /, ": "), c.passed]));
    const good = passed([row("approximate", 0.5, 0), row("events", 0.6, 1)]);
    expect(Object.values(good).every(Boolean)).toBe(true);
    const bad = kvEventsChecks([row("approximate", 0.6, 0), row("events", 0.5, 0.9)]).filter(
      (c) => !c.passed,
    );
    expect(bad.map((c) => c.claim)).toEqual([
      expect.stringContaining("prediction within 2.0%"),
      expect.stringContaining("at least as much of the prompt"),
      expect.stringContaining("recomputes fewer prompt tokens"),
    ]);
  });

  it("runs only the conditions named, in the plan's order, and refuses a name the plan does not have", () => {
    const all: KvCondition[] = (["approximate", "events"] as const).map((placement) => ({
      name: `tight-r1-${placement}`,
      pressure: "tight",
      replicas: 1,
      placement,
      store: "memory",
    }));
    expect(selectConditions(all, undefined)).toBe(all);
    expect(selectConditions(all, ["tight-r1-events", "tight-r1-approximate"]).map((c) => c.name)).toEqual([
      "tight-r1-approximate",
      "tight-r1-events",
    ]);
    expect(() => selectConditions(all, ["tight-r1-event"])).toThrow(
      /tight-r1-event; this plan's: tight-r1-approximate, tight-r1-events/,
    );
    expect(() => selectConditions(all, [])).toThrow(/none given/);
    // Approximate conditions alone compare nothing, and the verdict says so.
    expect(kvEventsVerdict([], [])).toBe("No approximate and event-driven pair ran (--conditions).");
  });

  it("names the sessions by the seed alone, so two runs of a seed hash (and place) them alike", () => {
    const workload = {
      sessions: 3,
      turns: { min: 2, max: 3 },
      systemPromptChars: 200,
      subagentPromptChars: 100,
      toolResultChars: { min: 50, max: 100 },
      replyTokens: { min: 4, max: 8 },
      burstShare: 0,
      burstSize: { median: 2, p90: 2, min: 2, max: 2 },
      subagentTurns: { min: 1, max: 1 },
      thinkSeconds: { short: { min: 1, max: 2 }, long: { min: 2, max: 3 }, longShare: 0 },
      subagentThinkSeconds: { min: 1, max: 2 },
    };
    const ids = (seed: number): string[] => kvSessions(workload, seed).map((s) => s.id);
    expect(ids(42)).toEqual(["kvevents-s42-000", "kvevents-s42-001", "kvevents-s42-002"]);
    expect(kvSessions(workload, 42)).toEqual(kvSessions(workload, 42));
    expect(ids(43)).not.toEqual(ids(42));
    // Every other session names itself, whatever the seed's prefix.
    expect(ids(42).map(sendsSignal)).toEqual([true, false, true]);
  });

  it("splits the sessions between a client that names them and one that does not", () => {
    expect(["run-000", "run-001", "run-002", "run-003"].map(sendsSignal)).toEqual([true, false, true, false]);
  });
});

describe("the KV-events study, quick", () => {
  const { skip } = redisAvailable();
  it.skipIf(skip)(
    "runs approximate and event-driven placement behind 1 and 3 replicas (and 3 sharing a Redis), every call served",
    async () => {
      const result = await runKvEventsStudy({
        seed: 42,
        timeScale: 10,
        quick: true,
        runId: "kvevents-test",
        progress: silentProgress,
      });
      const rows = Object.values(result.data) as Row[];
      expect(rows.map((r) => `${r.replicas}-${r.placement}-${r.store}`)).toEqual([
        "1-approximate-memory",
        "1-events-memory",
        "3-approximate-memory",
        "3-events-memory",
        "3-events-redis",
      ]);
      for (const numbers of rows) {
        expect(numbers.failed).toBe(0);
        expect(numbers.largestPromptTokens).toBeGreaterThan(9000);
        expect(numbers.cachedShare).toBeGreaterThan(0.2);
        if (numbers.placement === "approximate") {
          // Told nothing of the engines' caches, the gateway predicts nothing.
          expect(numbers.predictedTurns).toBe(0);
        } else {
          // Every call placed by events carries a prediction, and most are right to the token block.
          expect(numbers.predictedTurns).toBe(numbers.requests);
          expect(numbers.predictionWithinTolerance).toBeGreaterThanOrEqual(0.75);
          expect(numbers.reasons["kv_prefix"] ?? 0).toBeGreaterThan(0);
        }
      }
      expect(result.checks.length).toBeGreaterThan(4);
      expect(result.verdict).toContain("Event-driven vs approximate placement");
      expect(result.charts.map((c) => c.file)).toEqual(["kvevents-cached.svg", "kvevents-ttft.svg"]);
    },
    180_000,
  );
});
