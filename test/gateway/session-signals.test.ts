// Clients' own session signals through the gateway: each keeps a session on one engine and says who named it.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SMALL_MODEL, metaOf, startCluster, type AgentServeMeta, type Cluster } from "../helpers/cluster.js";

describe("session signals through the gateway", () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster(
      [0, 1, 2, 3].map((i) => ({ id: `small-${i}`, tier: "small", maxInflight: 4 })),
    );
  });
  afterAll(() => cluster.close());

  async function post(
    path: string,
    body: Record<string, unknown>,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; meta: AgentServeMeta; headers: Headers; json: Record<string, unknown> }> {
    const response = await fetch(`${cluster.url}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: JSON.stringify({ model: SMALL_MODEL, max_tokens: 4, ...body }),
    });
    const json = (await response.json()) as Record<string, unknown>;
    return { status: response.status, meta: metaOf(json), headers: response.headers, json };
  }

  function chat(system: string, turns: number): Record<string, unknown>[] {
    const messages: Record<string, unknown>[] = [{ role: "system", content: system }];
    for (let t = 0; t < turns; t++) {
      messages.push({ role: "user", content: `turn ${t}` });
      if (t + 1 < turns) messages.push({ role: "assistant", content: `reply ${t}` });
    }
    return messages;
  }

  const signals: [string, (id: string) => Record<string, string>, string][] = [
    ["Claude Code's header", (id) => ({ "x-claude-code-session-id": id }), "header:x-claude-code-session-id"],
    ["Codex's session-id header", (id) => ({ "session-id": id }), "header:session-id"],
    ["x-session-affinity", (id) => ({ "x-session-affinity": id }), "header:x-session-affinity"],
  ];
  for (const [name, signal, source] of signals) {
    it(`${name}: one miss then hits on one engine, session_source ${source}`, async () => {
      const metas: AgentServeMeta[] = [];
      for (let turn = 1; turn <= 4; turn++) {
        const { status, meta, headers } = await post(
          "/v1/chat/completions",
          { messages: chat(`agent for ${name}`, turn) },
          signal(`session-${name}`),
        );
        expect(status).toBe(200);
        expect(headers.get("x-agent-serve-session-source")).toBe(source);
        metas.push(meta);
      }
      expect(metas.map((m) => m.affinity_hit)).toEqual([false, true, true, true]);
      expect(new Set(metas.map((m) => m.backend_id)).size).toBe(1);
      expect(new Set(metas.map((m) => m.session_id)).size).toBe(1);
      expect(metas[0]!.session_id!.startsWith(`session-${name}`)).toBe(true);
      expect(metas.every((m) => m.session_source === source)).toBe(true);
    });
  }

  it("prompt_cache_key names the session on /v1/responses (store false) and on chat", async () => {
    const responses: AgentServeMeta[] = [];
    for (let turn = 1; turn <= 3; turn++) {
      const input = chat("codex", turn).slice(1);
      const { status, meta } = await post("/v1/responses", {
        instructions: "You are Codex.",
        input,
        store: false,
        prompt_cache_key: "codex-thread-1",
        max_output_tokens: 4,
        max_tokens: undefined,
      });
      expect(status).toBe(200);
      responses.push(meta);
    }
    expect(responses.map((m) => m.affinity_hit)).toEqual([false, true, true]);
    expect(responses.every((m) => m.session_source === "body:prompt_cache_key")).toBe(true);
    const { meta } = await post("/v1/chat/completions", { messages: chat("x", 1), prompt_cache_key: "k" });
    expect(meta.session_source).toBe("body:prompt_cache_key");
  });

  it("a request without any signal has no session and no source", async () => {
    const { meta, headers } = await post("/v1/chat/completions", { messages: chat("plain", 1) });
    expect(meta.session_id).toBeNull();
    expect(meta.session_source).toBeNull();
    expect(headers.get("x-agent-serve-session-source")).toBeNull();
  });

  it("a burst of sub-agents of one session spreads within the load bound; each keeps its engine; the parent stays", async () => {
    const session = { "x-claude-code-session-id": "parent-with-subagents" };
    const parentFirst = await post("/v1/chat/completions", { messages: chat("main agent", 1) }, session);
    // Eight sub-agents at once: the same sub-agent prompt, each its own task (the first user turn).
    const subMessages = (i: number, turns: number): Record<string, unknown>[] => {
      const messages: Record<string, unknown>[] = [
        { role: "system", content: "You are a task agent." },
        { role: "user", content: `task ${i}: look into module ${i}` },
      ];
      for (let t = 1; t < turns; t++)
        messages.push({ role: "assistant", content: "ok" }, { role: "user", content: `more ${t}` });
      return messages;
    };
    const first = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        post("/v1/chat/completions", { messages: subMessages(i, 1) }, session),
      ),
    );
    expect(first.every((r) => r.status === 200)).toBe(true);
    const perEngine = new Map<string, number>();
    for (const r of first) perEngine.set(r.meta.backend_id, (perEngine.get(r.meta.backend_id) ?? 0) + 1);
    // Eight threads over four engines at load factor 1.25: at most ceil(1.25 x 8 / 4) = 3 on any engine.
    expect(Math.max(...perEngine.values())).toBeLessThanOrEqual(3);
    expect(perEngine.size).toBeGreaterThan(1);
    expect(new Set(first.map((r) => r.meta.session_id)).size).toBe(8);
    // Each sub-agent's next turn returns to its own engine.
    const second = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        post("/v1/chat/completions", { messages: subMessages(i, 2) }, session),
      ),
    );
    for (let i = 0; i < 8; i++) {
      expect(second[i]!.meta.affinity_hit).toBe(true);
      expect(second[i]!.meta.backend_id).toBe(first[i]!.meta.backend_id);
    }
    const parentNext = await post("/v1/chat/completions", { messages: chat("main agent", 2) }, session);
    expect(parentNext.meta.affinity_hit).toBe(true);
    expect(parentNext.meta.backend_id).toBe(parentFirst.meta.backend_id);
    expect(parentNext.meta.session_id).toBe(parentFirst.meta.session_id);
  });

  it("a malformed signal is a 400 in the error envelope", async () => {
    const response = await fetch(`${cluster.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: SMALL_MODEL, messages: chat("x", 1), prompt_cache_key: "x".repeat(300) }),
    });
    expect(response.status).toBe(400);
    const body = (await response.json()) as { error: { param: string } };
    expect(body.error.param).toBe("prompt_cache_key");
  });
});
