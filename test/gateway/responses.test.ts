// The Responses API through the gateway: a conversation chained only by previous_response_id stays on the engine
// that stores it (and counts like a session), streams carry the metadata, and a lost engine is a clear error.
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import {
  metricValue,
  scrape,
  SMALL_MODEL,
  startCluster,
  type AgentServeMeta,
  type Cluster,
} from "../helpers/cluster.js";

const ENGINES = [
  { id: "small-0", tier: "small" },
  { id: "small-1", tier: "small" },
  { id: "small-2", tier: "small" },
];
const INSTRUCTIONS = "You are a careful assistant. ".repeat(40);

interface ResponseBody {
  id: string;
  usage: { input_tokens: number; input_tokens_details: { cached_tokens: number } };
  x_agent_serve: AgentServeMeta;
}

async function respond(
  url: string,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: Record<string, unknown>; headers: Headers }> {
  const response = await fetch(`${url}/v1/responses`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: SMALL_MODEL, max_output_tokens: 8, ...body }),
  });
  return {
    status: response.status,
    json: (await response.json()) as Record<string, unknown>,
    headers: response.headers,
  };
}

describe("the Responses API through the gateway", () => {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  it("keeps a conversation chained only by response ids on one engine, reusing its cache, counted as a session", async () => {
    cluster = await startCluster(ENGINES);
    const before = await scrape(cluster.url);
    const turns: ResponseBody[] = [];
    let previous: string | undefined;
    for (let turn = 0; turn < 4; turn++) {
      const { status, json } = await respond(cluster.url, {
        instructions: INSTRUCTIONS,
        input: `question number ${turn}`,
        ...(previous === undefined ? {} : { previous_response_id: previous }),
      });
      expect(status).toBe(200);
      const body = json as unknown as ResponseBody;
      turns.push(body);
      previous = body.id;
    }
    const backends = new Set(turns.map((t) => t.x_agent_serve.backend_id));
    expect(backends.size).toBe(1);
    expect(turns.map((t) => t.x_agent_serve.affinity_hit)).toEqual([false, true, true, true]);
    expect(turns[0]!.x_agent_serve.reason).toBe("new_session");
    // Each later turn's prompt is the stored history plus the new input: the engine serves it from its cache.
    for (const turn of turns.slice(1)) {
      expect(turn.usage.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(
        turns[0]!.usage.input_tokens - 16,
      );
    }
    const after = await scrape(cluster.url);
    const delta = (name: string) =>
      metricValue(after, name, { tier: "small" }) - metricValue(before, name, { tier: "small" });
    expect(delta("agentserve_affinity_hits_total")).toBe(3);
    expect(delta("agentserve_affinity_misses_total")).toBe(1);

    // Retrieval goes to the storing engine too.
    const retrieved = await fetch(`${cluster.url}/v1/responses/${turns[3]!.id}`);
    expect(retrieved.status).toBe(200);
    expect(retrieved.headers.get("x-agent-serve-backend")).toBe([...backends][0]);
    expect(((await retrieved.json()) as { id: string }).id).toBe(turns[3]!.id);
  });

  it("sends a continuation to the storing engine whatever its session header says", async () => {
    cluster = await startCluster(ENGINES);
    const first = (await respond(cluster.url, { input: "hi" }, { "x-session-id": "s-a" }))
      .json as unknown as ResponseBody;
    // Other session ids rank the engines differently; the response's engine still wins.
    for (const session of ["s-b", "s-c", "s-d", "s-e"]) {
      const next = (
        await respond(
          cluster.url,
          { input: "more", previous_response_id: first.id },
          { "x-session-id": session },
        )
      ).json as unknown as ResponseBody;
      expect(next.x_agent_serve.backend_id).toBe(first.x_agent_serve.backend_id);
    }
  });

  it("streams through the official SDK with x_agent_serve on the final event, and remembers the streamed id", async () => {
    cluster = await startCluster(ENGINES);
    const openai = new OpenAI({ baseURL: `${cluster.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const stream = await openai.responses.create({
      model: SMALL_MODEL,
      input: "stream it",
      max_output_tokens: 8,
      stream: true,
    });
    let text = "";
    let completed: Record<string, unknown> | undefined;
    for await (const event of stream) {
      if (event.type === "response.output_text.delta") text += event.delta;
      if (event.type === "response.completed") completed = event as unknown as Record<string, unknown>;
    }
    expect(text.length).toBeGreaterThan(0);
    const meta = completed!["x_agent_serve"] as AgentServeMeta;
    expect(meta).toMatchObject({ tier: "small", affinity_hit: false });
    const id = (completed!["response"] as { id: string }).id;
    const next = await openai.responses.create({
      model: SMALL_MODEL,
      input: "and then?",
      previous_response_id: id,
      max_output_tokens: 4,
    });
    const nextMeta = (next as unknown as { x_agent_serve: AgentServeMeta }).x_agent_serve;
    expect(nextMeta).toMatchObject({ backend_id: meta.backend_id, affinity_hit: true });
  });

  it("answers a clear 404 naming the response when the engine that stored it is gone", async () => {
    cluster = await startCluster(ENGINES, {
      health: { probe_interval_seconds: 0.05, failures_to_mark_down: 1, probe_timeout_seconds: 0.5 },
    });
    const first = (await respond(cluster.url, { input: "remember me" })).json as unknown as ResponseBody;
    const owner = first.x_agent_serve.backend_id;
    const registry = cluster.gateway.runtime.registry;
    const down = new Promise<void>((resolve) => {
      const off = registry.onHealthChange((t) => {
        if (t.backend.id === owner && t.to === "down") {
          off();
          resolve();
        }
      });
    });
    await cluster.engines.get(owner)!.close();
    await down;
    const lost = await respond(cluster.url, { input: "next", previous_response_id: first.id });
    expect(lost.status).toBe(404);
    const error = (lost.json as { error: { code: string; message: string; param: string } }).error;
    expect(error.code).toBe("response_lost");
    expect(error.param).toBe("previous_response_id");
    expect(error.message).toContain(first.id);
    expect(error.message).toContain(owner);
    const retrieved = await fetch(`${cluster.url}/v1/responses/${first.id}`);
    expect(retrieved.status).toBe(404);
    // A fresh conversation is served by the engines that are left.
    expect((await respond(cluster.url, { input: "start over" })).status).toBe(200);
  });
});
