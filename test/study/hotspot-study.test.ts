// The hotspot study end to end in quick mode: seven policies on simulated engines behind the real gateway.
import { describe, expect, it } from "vitest";
import { silentProgress } from "../../src/study/progress.js";
import { runHotspotStudy } from "../../src/study/studies/hotspot.js";

interface Numbers {
  requests: number;
  failed: number;
  spills: number;
  reasons: Record<string, number>;
  prefixCacheHitRate: number;
}

describe("hotspot study (quick)", () => {
  it("runs every policy on every workload, each placing by its own rule, and the study's invariants hold", async () => {
    const result = await runHotspotStudy({
      seed: 42,
      timeScale: 20,
      quick: true,
      runId: "test",
      progress: silentProgress,
    });
    const data = result.data as Record<string, Numbers>;
    const policies = ["round_robin", "least_loaded", "plain", "bounded", "prefix", "sglang", "llmd"];
    expect(Object.keys(data)).toEqual(
      ["uniform", "hotspot", "mixed"].flatMap((w) => policies.map((p) => `${w}:${p}`)),
    );
    const reasonsOf = (key: string) => Object.keys(data[key]!.reasons).sort();
    for (const workload of ["uniform", "hotspot", "mixed"]) {
      expect(reasonsOf(`${workload}:round_robin`)).toEqual(["affinity_disabled"]);
      expect(reasonsOf(`${workload}:prefix`)).toEqual(["prefix"]);
      expect(reasonsOf(`${workload}:llmd`)).toEqual(["max_score"]);
      for (const r of reasonsOf(`${workload}:sglang`))
        expect(["cache_match", "smallest_tree", "least_load"]).toContain(r);
      expect(data[`${workload}:plain`]!.spills).toBe(0);
    }
    // The fan-out overflows the hot session's engine: bounded-load affinity spills there, plain never does.
    expect(data["hotspot:bounded"]!.spills).toBeGreaterThan(0);
    // Every SVG named, and every invariant (not the measured goals, which are latency and wall-clock bound) holds.
    expect(result.charts.map((c) => c.file)).toEqual([
      "hotspot-uniform-ttft.svg",
      "hotspot-hotspot-ttft.svg",
      "hotspot-mixed-ttft.svg",
      "hotspot-cache.svg",
    ]);
    const invariants = result.checks.filter((c) => !c.claim.startsWith("goal:"));
    expect(invariants.length).toBe(22);
    expect(invariants.filter((c) => !c.passed)).toEqual([]);
    expect(result.checks.filter((c) => c.claim.startsWith("goal:")).length).toBe(5);
    // 58 s alone on a loaded 2-core machine (bench/README.md, "Hotspot study memory"): a guard, not a speed claim.
  }, 180_000);
});
