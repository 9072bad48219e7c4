// Streaming edge cases: failures before and after the first byte, and clients that leave mid-stream.
import { afterEach, describe, expect, it } from "vitest";
import { chat, metaOf, startCluster, type AgentServeMeta, type Cluster } from "../helpers/cluster.js";
import { waitUntil } from "../helpers/wait.js";

function sseEvents(text: string): string[] {
  return text
    .split("\n\n")
    .map((e) => e.trim())
    .filter((e) => e.startsWith("data: "))
    .map((e) => e.slice(6));
}

function metaFromStream(text: string): AgentServeMeta {
  const event = sseEvents(text).find((e) => e.includes('"x_agent_serve"'))!;
  return (JSON.parse(event) as { x_agent_serve: AgentServeMeta }).x_agent_serve;
}

describe("streaming through the gateway", () => {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  it("ends a stream cut after bytes reached the client with an error event and [DONE]", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small" }]);
    cluster.engines.get("small-0")!.setFault({ kind: "cut_stream", afterChunks: 3 });
    const { status, text } = await chat(cluster.url, { session: "cut", stream: true, maxTokens: 32 });
    expect(status).toBe(200);
    const events = sseEvents(text);
    expect(events.at(-1)).toBe("[DONE]");
    const error = JSON.parse(events.at(-2)!) as { error: { code: string; message: string } };
    expect(error.error.code).toBe("upstream_error");
    expect(JSON.parse(events[0]!)).toMatchObject({ x_agent_serve: { backend_id: "small-0" } });
  });

  it("retries a stream that fails before its first chunk on another backend", async () => {
    cluster = await startCluster([
      { id: "small-0", tier: "small" },
      { id: "small-1", tier: "small" },
    ]);
    const first = metaOf((await chat(cluster.url, { session: "early-cut" })).json).backend_id;
    cluster.engines.get(first)!.setFault({ kind: "cut_stream", afterChunks: 0 });
    const { status, text } = await chat(cluster.url, { session: "early-cut", stream: true });
    expect(status).toBe(200);
    expect(sseEvents(text).some((e) => e.startsWith('{"error"'))).toBe(false);
    expect(metaFromStream(text)).toMatchObject({ attempts: 2, reason: "failover" });
    expect(metaFromStream(text).backend_id).not.toBe(first);
  });

  it("cancels the engine's request when the client disconnects mid-stream", async () => {
    cluster = await startCluster([
      { id: "small-0", tier: "small", sim: { profile: "qwen2.5-7b", timeScale: 1 } },
    ]);
    const engine = cluster.engines.get("small-0")!;
    const controller = new AbortController();
    const response = await fetch(`${cluster.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-session-id": "leaver" },
      body: JSON.stringify({
        model: "sim-small",
        messages: [{ role: "user", content: "write a long story" }],
        max_tokens: 2000,
        stream: true,
      }),
      signal: controller.signal,
    });
    const reader = response.body!.getReader();
    await reader.read(); // the first chunk arrived: the request is generating on the engine
    expect(engine.stats().running).toBe(1);
    controller.abort();
    const stopped = (): boolean => engine.stats().running === 0 && engine.stats().requestsAborted > 0;
    await waitUntil("the engine's request aborted", stopped, engine.onChange);
    expect(engine.stats().requestsAborted).toBe(1);
    expect(engine.stats().requestsServed).toBe(0);
    expect(cluster.gateway.runtime.registry.get("small-0")!.inflight).toBe(0);
  });
});
