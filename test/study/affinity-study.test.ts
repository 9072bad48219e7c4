// One short study end to end: simulated engines, a gateway, the affinity study's conditions (busy fleet first).
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
        receipts: { receipted: number; reusableTokens: number; lostTokens: number };
      }
    >;
    expect(Object.keys(data)).toEqual(["busy_on", "busy_off", "on", "off", "ttl0"]);
    // The leading comparison: the busy fleet with and without affinity, receipted turn by turn.
    expect(data["busy_on"]).toMatchObject({ requests: 48, bindingHits: 40, metricsHits: 40, failed: 0 });
    expect(data["busy_off"]).toMatchObject({ requests: 48, bindingHits: 0, metricsHits: 0, failed: 0 });
    expect(data["busy_on"]!.receipts).toMatchObject({ receipted: 48, lostTokens: 0 });
    expect(data["busy_off"]!.receipts.reusableTokens).toBe(data["busy_on"]!.receipts.reusableTokens);
    expect(result.tables[0]!.title).toMatch(/^Does affinity pay\?/);
    // The report says which way it came out.
    expect(result.verdict).toMatch(/^The busy fleet (shows what affinity is for|does NOT show a difference)/);
    // Charts name conditions in words, and a number no turn had ("-" in the table) draws no bar.
    const latency = result.charts.find((c) => c.file === "affinity-latency.svg")!.svg;
    expect(latency).not.toMatch(/>(busy_on|ttl0)</);
    expect(latency).toContain("OFF as the original ran it (fresh ids)");
    expect(latency).not.toMatch(/class="value"[^>]*>0\.00</);
    expect(data["on"]).toMatchObject({ requests: 24, bindingHits: 20, metricsHits: 20, failed: 0 });
    expect(data["off"]).toMatchObject({ requests: 24, bindingHits: 0, metricsHits: 0, failed: 0 });
    expect(data["ttl0"]).toMatchObject({ requests: 24, bindingHits: 0, metricsHits: 0, failed: 0 });
    expect(data["on"]!.prefixCacheHitRate).toBeGreaterThan(0.5);
    expect(result.records).toHaveLength(72 + 96);
    // Every check but the latency one: wall-clock timings are for the benchmark runs, not the test suite.
    const failed = result.checks.filter((c) => !c.passed && !c.claim.includes("TTFT"));
    expect(failed).toEqual([]);
    expect(result.checks.some((c) => c.claim.includes("TTFT"))).toBe(true);
    expect(result.charts.map((c) => c.file)).toEqual(["affinity-hit-rates.svg", "affinity-latency.svg"]);
  });
});
