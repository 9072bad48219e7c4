// Route receipts end to end on simulated engines: a continued conversation reuses what its engine cached, and
// each way of losing the cache (compaction, eviction, failover, spill, an expired binding, a tier change) is named.
import { afterEach, describe, expect, it } from "vitest";
import { metricValue, scrape, startCluster, type Cluster } from "../helpers/cluster.js";
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
});
