// The product's heart end to end: the official OpenAI SDK through the gateway keeps a session on one engine.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  SMALL_MODEL,
  metricValue,
  scrape,
  startCluster,
  type AgentServeMeta,
  type Cluster,
} from "../helpers/cluster.js";

describe("session affinity through the gateway", () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster([
      { id: "big-0", tier: "big" },
      { id: "small-0", tier: "small" },
      { id: "small-1", tier: "small" },
    ]);
  });
  afterAll(() => cluster.close());

  function client(session: string): OpenAI {
    return new OpenAI({
      baseURL: `${cluster.url}/v1`,
      apiKey: "unused",
      defaultHeaders: { "X-Session-Id": session },
      maxRetries: 0,
    });
  }

  it("a 6-turn session gives one miss then five hits on one backend, and the counters move by exactly that", async () => {
    const before = await scrape(cluster.url);
    const openai = client("agent-session-six-turns");
    const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
      { role: "system", content: "You are a careful agent. ".repeat(40) },
    ];
    const metas: AgentServeMeta[] = [];
    for (let turn = 1; turn <= 6; turn++) {
      messages.push({ role: "user", content: `turn ${turn}: what next?` });
      const { data, response } = await openai.chat.completions
        .create({ model: SMALL_MODEL, messages, max_tokens: 8 })
        .withResponse();
      const meta = (data as unknown as { x_agent_serve: AgentServeMeta }).x_agent_serve;
      metas.push(meta);
      expect(response.headers.get("x-agent-serve-backend")).toBe(meta.backend_id);
      expect(response.headers.get("x-agent-serve-affinity-hit")).toBe(String(meta.affinity_hit));
      expect(response.headers.get("x-agent-serve-tier")).toBe("small");
      messages.push({ role: "assistant", content: data.choices[0]!.message.content ?? "" });
    }
    expect(metas.map((m) => m.affinity_hit)).toEqual([false, true, true, true, true, true]);
    expect(metas.map((m) => m.reason)).toEqual(["new_session", ...Array(5).fill("affinity_hit")]);
    expect(new Set(metas.map((m) => m.backend_id)).size).toBe(1);
    expect(metas.every((m) => m.session_id === "agent-session-six-turns" && m.attempts === 1)).toBe(true);

    const after = await scrape(cluster.url);
    const delta = (name: string): number =>
      metricValue(after, name, { tier: "small" }) - metricValue(before, name, { tier: "small" });
    expect(delta("agentserve_affinity_hits_total")).toBe(5);
    expect(delta("agentserve_affinity_misses_total")).toBe(1);
    expect(delta("agentserve_affinity_broken_total")).toBe(0);
  });

  it("streams through the SDK unchanged, with x_agent_serve on the engine's first chunk", async () => {
    const openai = client("agent-session-stream");
    const seen: Record<string, unknown>[] = [];
    let text = "";
    for (let turn = 0; turn < 2; turn++) {
      const stream = await openai.chat.completions.create({
        model: SMALL_MODEL,
        messages: [{ role: "user", content: "stream please" }],
        max_tokens: 12,
        stream: true,
      });
      for await (const chunk of stream) {
        seen.push(chunk as unknown as Record<string, unknown>);
        text += chunk.choices[0]?.delta.content ?? "";
      }
    }
    expect(text.length).toBeGreaterThan(0);
    const metaChunks = seen.filter((c) => "x_agent_serve" in c);
    expect(metaChunks).toHaveLength(2);
    const [first, second] = metaChunks.map((c) => c["x_agent_serve"] as AgentServeMeta);
    expect(first).toMatchObject({ affinity_hit: false, reason: "new_session", tier: "small" });
    expect(second).toMatchObject({
      affinity_hit: true,
      reason: "affinity_hit",
      backend_id: first!.backend_id,
    });
    // No chunk is added: each chunk carrying the metadata is one the engine sent, with a choice in it, so the
    // common `chunk.choices[0].delta` loop never meets an empty `choices`.
    expect(seen.every((c) => Array.isArray(c["choices"]) && (c["choices"] as unknown[]).length === 1)).toBe(
      true,
    );
    const firstOfEachStream = seen.filter(
      (c) => (c["choices"] as { delta: { role?: string } }[])[0]!.delta.role,
    );
    expect(firstOfEachStream).toEqual(metaChunks);
  });

  it("routes by model: the big model goes to the big tier", async () => {
    const response = await client("big-model-session").chat.completions.create({
      model: "sim-big",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
    });
    const meta = (response as unknown as { x_agent_serve: AgentServeMeta }).x_agent_serve;
    expect(meta).toMatchObject({ tier: "big", backend_id: "big-0" });
  });

  it("lists every model of every tier", async () => {
    const models = await client("x").models.list();
    expect(models.data.map((m) => m.id).sort()).toEqual(["sim-big", "sim-small"]);
  });

  it("spreads new sessions over the tier's backends (rendezvous), each staying put", async () => {
    const counts = new Map<string, number>();
    for (let i = 0; i < 40; i++) {
      const response = await client(`spread-${i}`).chat.completions.create({
        model: SMALL_MODEL,
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 2,
      });
      const backend = (response as unknown as { x_agent_serve: AgentServeMeta }).x_agent_serve.backend_id;
      counts.set(backend, (counts.get(backend) ?? 0) + 1);
    }
    expect([...counts.keys()].sort()).toEqual(["small-0", "small-1"]);
    expect(Math.min(...counts.values())).toBeGreaterThanOrEqual(8);
  });
});
