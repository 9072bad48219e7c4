// max_inflight is enforced: extra requests wait in a bounded queue (reported), or get 503 when it is full.
import { afterEach, describe, expect, it } from "vitest";
import { chat, metaOf, startCluster, type Cluster } from "../helpers/cluster.js";

describe("max_inflight and the queue", () => {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  it("queues requests beyond max_inflight and reports the wait", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small", maxInflight: 1 }]);
    cluster.engines.get("small-0")!.setFault({ kind: "slow", extraLatencyMs: 150 });
    const results = await Promise.all([0, 1, 2].map((i) => chat(cluster!.url, { session: `q-${i}` })));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    const waits = results.map((r) => metaOf(r.json).queue_wait_ms).sort((a, b) => a - b);
    expect(waits[0]).toBeLessThan(50);
    expect(waits[1]).toBeGreaterThanOrEqual(100);
    expect(waits[2]).toBeGreaterThanOrEqual(waits[1]! + 100);
  });

  it("refuses at once with 503 and Retry-After when the queue is full", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small", maxInflight: 1 }], {
      admission: { max_queue_size: 1 },
    });
    cluster.engines.get("small-0")!.setFault({ kind: "slow", extraLatencyMs: 200 });
    const results = await Promise.all([0, 1, 2].map((i) => chat(cluster!.url, { session: `full-${i}` })));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).toEqual([200, 200, 503]);
    const refused = results.find((r) => r.status === 503)!;
    expect(refused.json).toMatchObject({ error: { code: "queue_full" } });
    expect(refused.headers.get("retry-after")).toBe("1");
  });

  it("gives up waiting after queue_timeout_seconds with 503", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small", maxInflight: 1 }], {
      admission: { queue_timeout_seconds: 0.1 },
    });
    cluster.engines.get("small-0")!.setFault({ kind: "slow", extraLatencyMs: 400 });
    const results = await Promise.all([0, 1].map((i) => chat(cluster!.url, { session: `timeout-${i}` })));
    expect(results.map((r) => r.status).sort()).toEqual([200, 503]);
    expect(results.find((r) => r.status === 503)!.json).toMatchObject({ error: { code: "queue_timeout" } });
  });
});
