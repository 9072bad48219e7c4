// The gateway reads each engine's /metrics and republishes its load and prefix-cache truth.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/core/clock.js";
import { chat, metricValue, scrape, startCluster, type Cluster } from "../helpers/cluster.js";
import { WatchedTimers, waitUntil } from "../helpers/wait.js";

describe("engine load from the engines' own metrics", () => {
  let cluster: Cluster;
  // The engine's /metrics is read when this clock says so (the first reading is due at start).
  const clock = new ManualClock(1_000_000);
  const timers = new WatchedTimers(clock);
  beforeAll(async () => {
    cluster = await startCluster(
      [{ id: "small-0", tier: "small" }],
      { health: { engine_metrics_interval_seconds: 1 } },
      { clock, timers },
    );
  });
  afterAll(() => cluster.close());

  it("republishes the engine's prefix-cache queries and hits, matching the engine's own counters", async () => {
    const long = "A long shared system prompt for prefix caching. ".repeat(40);
    for (let turn = 0; turn < 3; turn++) {
      expect(
        (
          await chat(cluster.url, {
            session: "load",
            messages: [
              { role: "system", content: long },
              { role: "user", content: `turn ${turn}` },
            ],
          })
        ).status,
      ).toBe(200);
    }
    const engine = cluster.engines.get("small-0")!;
    const expected = engine.stats();
    expect(expected.prefixCacheHits).toBeGreaterThan(0);
    // The reading due now runs; once it is in, the next one is scheduled (the event waited on).
    const backend = cluster.gateway.runtime.registry.get("small-0")!;
    timers.advance(0);
    await waitUntil(
      "the engine's metrics read",
      () => backend.engineLoad?.prefixCacheHits === expected.prefixCacheHits,
      timers.onSchedule,
    );
    const metrics = await scrape(cluster.url);
    expect(metricValue(metrics, "agentserve_backend_prefix_cache_queries", { backend: "small-0" })).toBe(
      expected.prefixCacheQueries,
    );
    expect(metricValue(metrics, "agentserve_backend_waiting_requests", { backend: "small-0" })).toBe(0);
    expect(metricValue(metrics, "agentserve_backend_kv_cache_usage_ratio", { backend: "small-0" })).toBe(0);
  });
});
