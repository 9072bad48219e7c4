// The run's summary: the numbers it reports and checks that fail when affinity did not hold.
import { describe, expect, it } from "vitest";
import type { AgentRun } from "../../src/agent/fleet.js";
import type { ModelStep } from "../../src/agent/model-call.js";
import { summarize } from "../../src/agent/summary.js";

function step(backend: string, affinityHit: boolean, ttftMs: number, cached: number): ModelStep {
  return {
    content: "ok",
    toolCalls: [],
    finishReason: "stop",
    status: 200,
    backend,
    tier: "small",
    affinityHit,
    reason: affinityHit ? "affinity_hit" : "new_session",
    ttftMs,
    e2eMs: ttftMs * 2,
    promptTokens: 100,
    cachedTokens: cached,
    completionTokens: 5,
  };
}

function run(agent: string, steps: ModelStep[]): AgentRun {
  return {
    agent,
    sessionId: `s-${agent}`,
    turns: steps.map((s, i) => ({
      turn: i + 1,
      steps: [s],
      toolCalls: [{ name: "calculator", ok: i % 2 === 0, durationMs: 1 }],
      answer: "ok",
      completed: true,
    })),
  };
}

const base = { toolNames: ["calculator", "read_file"], timeScale: 10, seed: 1, maxSteps: 4, configs: [] };

describe("summarize", () => {
  it("reports hit rate, cold vs warm TTFT in engine time, cache share and tool counts", () => {
    const result = summarize({
      ...base,
      runs: [
        run("a", [step("e0", false, 40, 0), step("e0", true, 5, 90), step("e0", true, 7, 90)]),
        run("b", [step("e1", false, 60, 50), step("e1", true, 9, 90)]),
      ],
    });
    expect(result.data).toMatchObject({
      modelCalls: 5,
      affinityHitRate: 3 / 5,
      laterCalls: 3,
      laterCallHits: 3,
      ttftP50ColdMs: 500, // (400 + 600) / 2: wall ms times the time scale
      ttftP50WarmMs: 70,
      promptTokens: 500,
      cachedTokens: 320,
      toolCalls: { calculator: 5, read_file: 0 },
    });
    expect(result.tables[2]!.rows).toEqual([
      ["calculator", 5, 3, 2, "1 ms"],
      ["read_file", 0, 0, 0, "n/a"],
    ]);
    expect(result.checks.every((check) => check.passed)).toBe(true);
    expect(result.records).toHaveLength(5);
  });

  it("fails its checks when a session moved or a later call missed", () => {
    const result = summarize({
      ...base,
      runs: [
        run("a", [step("e0", false, 40, 0), step("e1", false, 30, 0)]),
        run("b", [step("e1", false, 60, 0)]),
      ],
    });
    const failed = result.checks.filter((check) => !check.passed).map((check) => check.claim);
    expect(failed).toEqual([
      "each session stayed on one engine",
      "every model call after a session's first was an affinity hit",
    ]);
  });
});
