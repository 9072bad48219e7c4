// One short study end to end: simulated engines, a gateway, the affinity study's three conditions.
import { describe, expect, it } from "vitest";
import { silentProgress } from "../../src/study/progress.js";
import { runAffinityStudy } from "../../src/study/studies/affinity.js";

describe("affinity study (quick)", () => {
  it("reproduces the original's hit rates, and metadata, metrics and checks agree", async () => {
    const result = await runAffinityStudy({
      seed: 42,
      timeScale: 5,
      quick: true,
      runId: "test",
      progress: silentProgress,
    });
    const data = result.data as Record<
      string,
      {
        requests: number;
        bindingHits: number;
        metricsHits: number;
        failed: number;
        prefixCacheHitRate: number;
      }
    >;
    expect(Object.keys(data)).toEqual(["on", "off", "ttl0"]);
    expect(data["on"]).toMatchObject({ requests: 24, bindingHits: 20, metricsHits: 20, failed: 0 });
    expect(data["off"]).toMatchObject({ requests: 24, bindingHits: 0, metricsHits: 0, failed: 0 });
    expect(data["ttl0"]).toMatchObject({ requests: 24, bindingHits: 0, metricsHits: 0, failed: 0 });
    expect(data["on"]!.prefixCacheHitRate).toBeGreaterThan(0.5);
    expect(result.records).toHaveLength(72);
    // Every check but the latency one: wall-clock timings are for the benchmark runs, not the test suite.
    const failed = result.checks.filter((c) => !c.passed && !c.claim.includes("TTFT"));
    expect(failed).toEqual([]);
    expect(result.checks.some((c) => c.claim.includes("TTFT"))).toBe(true);
    expect(result.charts.map((c) => c.file)).toEqual(["affinity-hit-rates.svg", "affinity-latency.svg"]);
  });
});
