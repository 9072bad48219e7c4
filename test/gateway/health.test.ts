// Active probes take a dead engine down and bring it back by the configured thresholds.
import { afterEach, describe, expect, it } from "vitest";
import type { HealthTransition } from "../../src/backends/registry.js";
import { startSimEngine } from "../../src/sim/index.js";
import {
  SMALL_MODEL,
  chat,
  metaOf,
  metricValue,
  scrape,
  startCluster,
  type Cluster,
} from "../helpers/cluster.js";

function nextTransition(cluster: Cluster, backendId: string): Promise<HealthTransition> {
  return new Promise((resolve) => {
    const off = cluster.gateway.runtime.registry.onHealthChange((t) => {
      if (t.backend.id !== backendId) return;
      off();
      resolve(t);
    });
  });
}

describe("health checking", () => {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  it("probes mark a dead engine down (breaking its bindings) and a restarted one up again", async () => {
    cluster = await startCluster(
      [
        { id: "small-0", tier: "small" },
        { id: "small-1", tier: "small" },
      ],
      {
        health: {
          probe_interval_seconds: 0.05,
          failures_to_mark_down: 3,
          successes_to_mark_up: 2,
          probe_timeout_seconds: 1,
        },
      },
    );
    const sessions = Array.from({ length: 12 }, (_, i) => `probe-${i}`);
    const placement = new Map<string, string>();
    for (const session of sessions)
      placement.set(session, metaOf((await chat(cluster.url, { session })).json).backend_id);
    const held = [...placement.values()].filter((b) => b === "small-0").length;

    const engine = cluster.engines.get("small-0")!;
    const port = engine.port;
    const down = nextTransition(cluster, "small-0");
    engine.setFault({ kind: "die" });
    expect(await down).toMatchObject({ to: "down", cause: "probe" });
    const metrics = await scrape(cluster.url);
    expect(metricValue(metrics, "agentserve_affinity_broken_total", { tier: "small" })).toBe(held);
    expect(metricValue(metrics, "agentserve_backend_up", { backend: "small-0" })).toBe(0);

    const moved = sessions.find((s) => placement.get(s) === "small-0")!;
    expect(metaOf((await chat(cluster.url, { session: moved })).json)).toMatchObject({
      backend_id: "small-1",
      reason: "rebind_backend_down",
      affinity_hit: false,
    });

    const up = nextTransition(cluster, "small-0");
    const restarted = await startSimEngine({ profile: "instant", model: SMALL_MODEL, port });
    cluster.engines.set("small-0", restarted);
    expect(await up).toMatchObject({ to: "up", cause: "probe" });
    // rebalance_on_backend_recovery is false: the moved session stays where its cache is warm now.
    expect(metaOf((await chat(cluster.url, { session: moved })).json)).toMatchObject({
      backend_id: "small-1",
      affinity_hit: true,
    });
  });
});
