// A flood of distinct session and agent ids leaves every per-client table at its cap, and the gateway serving.
import type { TokenBudgets } from "../../src/admission/token-budgets.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/core/clock.js";
import { chat, metaOf, metricValue, scrape, startCluster, type Cluster } from "../helpers/cluster.js";

describe("bounded state under a flood of ids", () => {
  let cluster: Cluster;
  // The gateway's time moves only when a request is sent (by more than the budget window): whether an
  // agent's usage has left its window never depends on how fast this machine is.
  const clock = new ManualClock(1_000_000);
  beforeAll(async () => {
    cluster = await startCluster(
      [
        { id: "small-0", tier: "small" },
        { id: "small-1", tier: "small" },
      ],
      // A window so short that each agent's usage has left it by the next request: a full table may then
      // forget its least recent agent for a newcomer (one with usage in its window it would refuse instead).
      { affinity: { max_bindings: 500 }, admission: { max_agents: 200, budget_window_seconds: 0.001 } },
      { clock },
    );
  });
  afterAll(() => cluster.close());

  it("caps the sticky table and the budget table, evicting least recently used", async () => {
    const total = 3000;
    let next = 0;
    const statuses: number[] = [];
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < total) {
          const i = next++;
          clock.advance(5);
          const { status } = await chat(cluster.url, {
            session: `flood-${i}-${Math.imul(i, 2654435761) >>> 0}`,
            headers: { "x-agent-id": `agent-${i}` },
            maxTokens: 1,
          });
          statuses.push(status);
        }
      }),
    );
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    const metrics = await scrape(cluster.url);
    expect(metricValue(metrics, "agentserve_sticky_bindings", { tier: "small" })).toBe(500);
    expect((cluster.gateway.runtime.budgets as TokenBudgets).agentCount).toBe(200);

    // The most recent sessions are still bound; the earliest were evicted and start over.
    const last = `flood-${total - 1}-${Math.imul(total - 1, 2654435761) >>> 0}`;
    expect(metaOf((await chat(cluster.url, { session: last })).json).affinity_hit).toBe(true);
    expect(metaOf((await chat(cluster.url, { session: `flood-0-0` })).json).reason).toBe("new_session");
  });
});
