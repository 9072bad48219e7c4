// Engines that die, hang or fail: clients see no error while another backend can serve.
import { afterEach, describe, expect, it } from "vitest";
import { chat, metaOf, metricValue, scrape, startCluster, type Cluster } from "../helpers/cluster.js";

const THREE_SMALL = [
  { id: "small-0", tier: "small" },
  { id: "small-1", tier: "small" },
  { id: "small-2", tier: "small" },
];

describe("failover", () => {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  it("retries a hung engine's request elsewhere after the first-byte timeout, and rebinds the session", async () => {
    cluster = await startCluster(THREE_SMALL, { upstream: { first_byte_timeout_seconds: 0.3 } });
    const first = await chat(cluster.url, { session: "hang-victim" });
    const pinned = metaOf(first.json).backend_id;
    cluster.engines.get(pinned)!.setFault({ kind: "hang" });

    const second = await chat(cluster.url, { session: "hang-victim" });
    expect(second.status).toBe(200);
    expect(metaOf(second.json)).toMatchObject({ attempts: 2, reason: "failover", affinity_hit: false });
    expect(metaOf(second.json).backend_id).not.toBe(pinned);

    const third = await chat(cluster.url, { session: "hang-victim" });
    expect(metaOf(third.json)).toMatchObject({
      backend_id: metaOf(second.json).backend_id,
      affinity_hit: true,
    });
    const metrics = await scrape(cluster.url);
    expect(metricValue(metrics, "agentserve_affinity_broken_total", { tier: "small" })).toBe(1);
    expect(metricValue(metrics, "agentserve_retries_total", { tier: "small" })).toBe(1);
  });

  it("answers 504 when every engine of the tier hangs", async () => {
    cluster = await startCluster(THREE_SMALL.slice(0, 2), {
      upstream: { first_byte_timeout_seconds: 0.2, max_attempts: 2 },
    });
    for (const engine of cluster.engines.values()) engine.setFault({ kind: "hang" });
    const { status, json } = await chat(cluster.url, { session: "all-hung" });
    expect(status).toBe(504);
    expect(json).toMatchObject({ error: { code: "upstream_timeout", type: "upstream_error" } });
  });

  it("retries 5xx answers on the next backend of the ranking", async () => {
    cluster = await startCluster(THREE_SMALL);
    const first = await chat(cluster.url, { session: "five-hundred" });
    const pinned = metaOf(first.json).backend_id;
    cluster.engines.get(pinned)!.setFault({ kind: "error_rate", rate: 1, status: 500 });
    const second = await chat(cluster.url, { session: "five-hundred" });
    expect(second.status).toBe(200);
    expect(metaOf(second.json)).toMatchObject({ attempts: 2, reason: "failover" });
    expect(metaOf(second.json).backend_id).not.toBe(pinned);
  });

  it("an engine that dies mid-traffic costs no request, and broken_total equals the bindings it held", async () => {
    cluster = await startCluster(THREE_SMALL, { health: { failures_to_mark_down: 2 } });
    const sessions = Array.from({ length: 30 }, (_, i) => `die-${i}`);
    const pinnedTo = new Map<string, string>();
    for (const session of sessions)
      pinnedTo.set(session, metaOf((await chat(cluster.url, { session })).json).backend_id);
    const victim = "small-1";
    const held = [...pinnedTo.values()].filter((b) => b === victim).length;
    expect(held).toBeGreaterThan(0);

    cluster.engines.get(victim)!.setFault({ kind: "die" });
    const results = await Promise.all(sessions.map((session) => chat(cluster!.url, { session })));
    expect(results.map((r) => r.status).filter((s) => s !== 200)).toEqual([]);
    for (const [i, result] of results.entries()) {
      const meta = metaOf(result.json);
      const before = pinnedTo.get(sessions[i]!)!;
      if (before === victim) expect(meta.backend_id).not.toBe(victim);
      else expect(meta).toMatchObject({ backend_id: before, affinity_hit: true });
    }
    const metrics = await scrape(cluster.url);
    expect(metricValue(metrics, "agentserve_affinity_broken_total", { tier: "small" })).toBe(held);
    expect(metricValue(metrics, "agentserve_backend_up", { backend: victim })).toBe(0);

    // The moved sessions stay on their new backend (rebalance_on_backend_recovery is false).
    const again = await Promise.all(sessions.map((session) => chat(cluster!.url, { session })));
    expect(again.every((r) => metaOf(r.json).affinity_hit)).toBe(true);
  });

  it("answers 503 with Retry-After when no backend of the tier is healthy", async () => {
    cluster = await startCluster(THREE_SMALL.slice(0, 1), { health: { failures_to_mark_down: 1 } });
    cluster.engines.get("small-0")!.setFault({ kind: "die" });
    // 502 if this request finds the engine dead, 503 if the start-up probe got there first.
    const first = await chat(cluster.url, { session: "lonely" });
    expect([502, 503]).toContain(first.status);
    const second = await chat(cluster.url, { session: "lonely" });
    expect(second.status).toBe(503);
    expect(second.headers.get("retry-after")).not.toBeNull();
    expect(second.json).toMatchObject({ error: { code: "no_healthy_backend" } });
    expect((await fetch(`${cluster.url}/readyz`)).status).toBe(503);
    expect((await fetch(`${cluster.url}/healthz`)).status).toBe(200);
  });
});
