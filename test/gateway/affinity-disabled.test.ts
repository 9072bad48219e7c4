// sticky_ttl_seconds: 0 disables affinity for real: only misses, and sessions spread by load.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chat, metaOf, metricValue, scrape, startCluster, type Cluster } from "../helpers/cluster.js";

describe("affinity disabled (TTL 0)", () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster(
      [
        { id: "small-0", tier: "small" },
        { id: "small-1", tier: "small" },
        { id: "small-2", tier: "small" },
      ],
      { affinity: { sticky_ttl_seconds: 0 } },
    );
  });
  afterAll(() => cluster.close());

  it("counts every request of a session as a miss and keeps no binding", async () => {
    const before = await scrape(cluster.url);
    const backends = new Set<string>();
    for (let turn = 0; turn < 6; turn++) {
      const { status, json } = await chat(cluster.url, { session: "ttl-zero" });
      expect(status).toBe(200);
      expect(metaOf(json)).toMatchObject({ affinity_hit: false, reason: "affinity_disabled" });
      backends.add(metaOf(json).backend_id);
    }
    const after = await scrape(cluster.url);
    expect(
      metricValue(after, "agentserve_affinity_misses_total", { tier: "small" }) -
        metricValue(before, "agentserve_affinity_misses_total", { tier: "small" }),
    ).toBe(6);
    expect(metricValue(after, "agentserve_affinity_hits_total", { tier: "small" })).toBe(0);
    expect(metricValue(after, "agentserve_sticky_bindings", { tier: "small" })).toBe(0);
    // Sequential requests leave every backend idle, so the seeded tie-break spreads one session around:
    // HRW, which the original still applied, would have kept it on one backend.
    expect(backends.size).toBeGreaterThan(1);
  });

  it("sends concurrent requests to the least loaded backends", async () => {
    // Slow engines keep the requests in flight together, so in-flight counts are what decides.
    for (const engine of cluster.engines.values()) engine.setFault({ kind: "slow", extraLatencyMs: 300 });
    const results = await Promise.all(
      Array.from({ length: 9 }, (_, i) => chat(cluster.url, { session: `load-${i}`, maxTokens: 32 })),
    );
    const perBackend = new Map<string, number>();
    for (const { json } of results) {
      const id = metaOf(json).backend_id;
      perBackend.set(id, (perBackend.get(id) ?? 0) + 1);
    }
    for (const engine of cluster.engines.values()) engine.setFault({ kind: "none" });
    expect([...perBackend.values()].sort()).toEqual([3, 3, 3]);
  });
});
