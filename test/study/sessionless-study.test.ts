// The sessionless study end to end in quick mode: six policies, requests without session ids, real gateway.
import { describe, expect, it } from "vitest";
import { silentProgress } from "../../src/study/progress.js";
import { runSessionlessStudy } from "../../src/study/studies/sessionless.js";

interface Numbers {
  requests: number;
  failed: number;
  reasons: Record<string, number>;
  enginesPerTemplate: number;
  warmCacheHitRate: number;
  prefixCacheHitRate: number;
}

describe("sessionless study (quick)", () => {
  it("places by prompt prefix under prefix placement and by the balancer otherwise; its checks hold", async () => {
    const result = await runSessionlessStudy({
      seed: 42,
      timeScale: 20,
      quick: true,
      runId: "test",
      progress: silentProgress,
    });
    const data = result.data as Record<string, Numbers>;
    const policies = ["round_robin", "least_loaded", "plain", "bounded", "sglang", "llmd"];
    expect(Object.keys(data)).toEqual(["templates", "zipf"].flatMap((w) => policies.map((p) => `${w}:${p}`)));
    expect(Object.keys(data["templates:least_loaded"]!.reasons)).toEqual(["no_session"]);
    expect(Object.keys(data["templates:plain"]!.reasons)).toEqual(["prefix"]);
    // Plain prefix placement: a template's every request on one engine (rendezvous on its prefix key).
    expect(data["templates:plain"]!.enginesPerTemplate).toBe(1);
    // Round-robin over 4 engines sends a template's 4 requests to more than one engine.
    expect(data["templates:round_robin"]!.enginesPerTemplate).toBeGreaterThan(1);
    // Every invariant holds; the goals (cache rates of a small, wall-clock-timed run) are measured, not asserted.
    const invariants = result.checks.filter((c) => !c.claim.startsWith("goal:"));
    expect(invariants.length).toBe(12);
    expect(invariants.filter((c) => !c.passed)).toEqual([]);
    expect(result.checks.filter((c) => c.claim.startsWith("goal:")).length).toBe(2);
  }, 60_000);
});
