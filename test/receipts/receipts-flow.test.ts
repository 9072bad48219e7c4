// Route receipts end to end on simulated engines: a continued conversation reuses what its engine cached, and
// each way of losing the cache (compaction, eviction, failover, spill, an expired binding, a tier change) is named.
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/core/clock.js";
import { BIG_MODEL, metricValue, scrape, startCluster, type Cluster } from "../helpers/cluster.js";
import { waitUntil } from "../helpers/wait.js";
import { SYSTEM, extend, reusableOf, tokensOf, turn, type Message } from "./helpers.js";

const TOKEN = "receipts-admin-token-0123456789";

let cluster: Cluster | undefined;
afterEach(async () => {
  await cluster?.close();
  cluster = undefined;
});

describe("route receipts", () => {
  it("a new session reuses nothing; its next turn reuses every whole block of the previous one", async () => {
    cluster = await startCluster(
      [
        { id: "small-0", tier: "small" },
        { id: "small-1", tier: "small" },
      ],
      { server: { admin_token: TOKEN } },
    );
    const first: Message[] = [SYSTEM, { role: "user", content: "List the files in src." }];
    const one = await turn(cluster.url, "flow", first);
    expect(one.receipt).toMatchObject({ reusable_tokens: 0, lost_tokens: 0, lost_cause: "new_session" });
    expect(one.headers.get("x-agent-serve-lost-cause")).toBe("new_session");

    const second = extend(first, one, "Open the first one.");
    const two = await turn(cluster.url, "flow", second);
    expect(two.backend).toBe(one.backend);
    const reusable = reusableOf(tokensOf(one));
    expect(two.receipt).toEqual({
      reusable_tokens: reusable,
      cached_tokens: two.usage.prompt_tokens_details!.cached_tokens,
      lost_tokens: 0,
      lost_cause: "none",
    });
    expect(two.receipt.cached_tokens).toBeGreaterThanOrEqual(reusable);
    expect(two.headers.get("x-agent-serve-reusable-tokens")).toBe(String(reusable));
    expect(two.headers.get("x-agent-serve-cached-tokens")).toBe(String(two.receipt.cached_tokens));

    // Compaction: the client replaced the history with a summary.
    const compacted: Message[] = [
      SYSTEM,
      { role: "user", content: "Summary: we listed src and opened a file." },
      { role: "user", content: "Now close it." },
    ];
    const three = await turn(cluster.url, "flow", compacted);
    expect(three.receipt).toMatchObject({
      reusable_tokens: 0,
      lost_tokens: 0,
      lost_cause: "conversation_changed",
    });

    const text = await scrape(cluster.url);
    expect(
      metricValue(text, "agentserve_prefix_tokens_total", { tier: "small", kind: "reusable", cause: "none" }),
    ).toBe(reusable);
    expect(
      metricValue(text, "agentserve_prefix_tokens_total", { tier: "small", kind: "lost", cause: "none" }),
    ).toBe(0);

    const admin = await fetch(`${cluster.url}/admin/sessions/flow`, {
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(admin.status).toBe(200);
    const body = (await admin.json()) as {
      backend_id: string;
      receipts: { lost_cause: string; reusable_tokens: number }[];
    };
    expect(body.backend_id).toBe(one.backend);
    expect(body.receipts.map((r) => r.lost_cause)).toEqual(["conversation_changed", "none", "new_session"]);
    expect(body.receipts[1]!.reusable_tokens).toBe(reusable);
  });

  it("evicted: the same engine, whose small KV cache had to make room for another session", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small", sim: { kvCapacityBlocks: 64 } }]);
    const first: Message[] = [SYSTEM, { role: "user", content: "List the files in src." }];
    const one = await turn(cluster.url, "kept", first);
    // Another session fills most of the engine's 64 blocks (1024 tokens) with a prompt of its own (~990 tokens).
    await turn(cluster.url, "filler", [{ role: "user", content: "zebra quantum ".repeat(265) }], {
      maxTokens: 4,
    });
    const two = await turn(cluster.url, "kept", extend(first, one, "Open the first one."));
    const reusable = reusableOf(tokensOf(one));
    expect(two.backend).toBe(one.backend);
    expect(two.receipt).toEqual({
      reusable_tokens: reusable,
      cached_tokens: two.usage.prompt_tokens_details!.cached_tokens,
      lost_tokens: reusable - two.receipt.cached_tokens,
      lost_cause: "evicted",
    });
    expect(two.receipt.lost_tokens).toBeGreaterThan(0);
  });

  it("failover: the session's engine died, the turn ran on another with nothing cached", async () => {
    cluster = await startCluster([
      { id: "small-0", tier: "small" },
      { id: "small-1", tier: "small" },
    ]);
    const first: Message[] = [SYSTEM, { role: "user", content: "List the files in src." }];
    const one = await turn(cluster.url, "dies", first);
    await cluster.engines.get(one.backend)!.close();
    const two = await turn(cluster.url, "dies", extend(first, one, "Open the first one."));
    const reusable = reusableOf(tokensOf(one));
    expect(two.backend).not.toBe(one.backend);
    expect(two.receipt).toEqual({
      reusable_tokens: reusable,
      cached_tokens: 0,
      lost_tokens: reusable,
      lost_cause: "failover",
    });
    const text = await scrape(cluster.url);
    expect(
      metricValue(text, "agentserve_prefix_tokens_total", { tier: "small", kind: "lost", cause: "failover" }),
    ).toBe(reusable);
  });

  it("spill: the session's engine had no free slot, the turn ran on the next one", async () => {
    cluster = await startCluster([
      { id: "small-0", tier: "small", maxInflight: 1 },
      { id: "small-1", tier: "small", maxInflight: 1 },
    ]);
    const first: Message[] = [SYSTEM, { role: "user", content: "List the files in src." }];
    const one = await turn(cluster.url, "spills", first);
    const home = cluster.engines.get(one.backend)!;
    // Another turn of the session holds the home engine's only slot.
    home.setFault({ kind: "slow", extraLatencyMs: 60_000 });
    const blocker = new AbortController();
    const held = fetch(`${cluster.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-session-id": "spills" },
      body: JSON.stringify({ messages: [{ role: "user", content: "side question" }], max_tokens: 4 }),
      signal: blocker.signal,
    }).catch(() => undefined);
    const { slots, registry } = cluster.gateway.runtime;
    const homeBackend = registry.get(one.backend)!;
    await waitUntil(
      "the side question holds the home slot",
      () => homeBackend.inflight === 1,
      slots.changes.subscribe,
    );
    const two = await turn(cluster.url, "spills", extend(first, one, "Open the first one."));
    blocker.abort();
    await held;
    home.setFault({ kind: "none" });
    const reusable = reusableOf(tokensOf(one));
    expect(two.reason).toBe("spill");
    expect(two.receipt).toEqual({
      reusable_tokens: reusable,
      cached_tokens: 0,
      lost_tokens: reusable,
      lost_cause: "spill",
    });
  });

  it("binding_expired: the binding lapsed (injected clock) and the session was placed again elsewhere", async () => {
    const clock = new ManualClock(1_000_000);
    cluster = await startCluster(
      [
        { id: "small-0", tier: "small" },
        { id: "small-1", tier: "small" },
      ],
      { affinity: { sticky_ttl_seconds: 60 }, server: { admin_token: TOKEN } },
      { clock },
    );
    const first: Message[] = [SYSTEM, { role: "user", content: "List the files in src." }];
    const one = await turn(cluster.url, "lapses", first);
    // The session's home is drained, so placing it again picks the other engine.
    const drained = await fetch(`${cluster.url}/admin/backends/${one.backend}/drain`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(drained.status).toBe(200);
    clock.advance(61_000);
    const two = await turn(cluster.url, "lapses", extend(first, one, "Open the first one."));
    const reusable = reusableOf(tokensOf(one));
    expect(two.reason).toBe("rebind_expired");
    expect(two.receipt).toEqual({
      reusable_tokens: reusable,
      cached_tokens: 0,
      lost_tokens: reusable,
      lost_cause: "binding_expired",
    });
  });

  it("tier_changed: the session's next turn asked for another tier", async () => {
    cluster = await startCluster([
      { id: "small-0", tier: "small" },
      { id: "big-0", tier: "big" },
    ]);
    const first: Message[] = [SYSTEM, { role: "user", content: "List the files in src." }];
    const one = await turn(cluster.url, "grows", first);
    const two = await turn(cluster.url, "grows", extend(first, one, "Now think hard."), { model: BIG_MODEL });
    const reusable = reusableOf(tokensOf(one));
    expect(two.backend).toBe("big-0");
    expect(two.receipt).toEqual({
      reusable_tokens: reusable,
      cached_tokens: 0,
      lost_tokens: reusable,
      lost_cause: "tier_changed",
    });
    const text = await scrape(cluster.url);
    expect(
      metricValue(text, "agentserve_prefix_tokens_total", {
        tier: "big",
        kind: "lost",
        cause: "tier_changed",
      }),
    ).toBe(reusable);
  });
});
