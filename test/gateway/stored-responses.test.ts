// GET, DELETE and POST .../cancel of a stored response: asked of the engine that stores it, through the attempt
// path, its answer relayed as the engine gave it (errors in the OpenAI envelope), a dead engine a 502.
import { afterEach, describe, expect, it } from "vitest";
import { SMALL_MODEL, startCluster, type Cluster } from "../helpers/cluster.js";

let cluster: Cluster | undefined;
afterEach(async () => {
  await cluster?.close();
  cluster = undefined;
});

async function stored(url: string): Promise<string> {
  const response = await fetch(`${url}/v1/responses`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": "stored" },
    body: JSON.stringify({ model: SMALL_MODEL, input: "hello", max_output_tokens: 4, store: true }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { id: string }).id;
}

describe("a stored response's routes", () => {
  it("reads, cancels and deletes on the storing engine, relaying its refusals", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small" }]);
    const id = await stored(cluster.url);
    const engine = cluster.engines.get("small-0")!;

    const read = await fetch(`${cluster.url}/v1/responses/${id}`);
    expect(read.status).toBe(200);
    expect(read.headers.get("x-agent-serve-backend")).toBe("small-0");
    expect(read.headers.get("x-request-id")).toBeTruthy();
    expect(((await read.json()) as { id: string }).id).toBe(id);

    // A cancel the engine refuses (the response is complete) is the engine's answer, in the OpenAI envelope.
    const direct = await fetch(`${engine.url}/v1/responses/${id}/cancel`, { method: "POST" });
    const cancelled = await fetch(`${cluster.url}/v1/responses/${id}/cancel`, { method: "POST" });
    expect(cancelled.status).toBe(direct.status);
    const body = (await cancelled.json()) as Record<string, unknown>;
    if (cancelled.status !== 200) expect(body).toMatchObject({ error: { message: expect.any(String) } });

    // vLLM (and the simulator) has no DELETE of a response: its 405 is relayed, and the response stays known.
    const deleted = await fetch(`${cluster.url}/v1/responses/${id}`, { method: "DELETE" });
    expect(deleted.status).toBe(405);
    expect(await deleted.json()).toMatchObject({ error: { message: expect.any(String) } });
    expect((await fetch(`${cluster.url}/v1/responses/${id}`)).status).toBe(200);
    // One the gateway never saw is its own 404.
    const unknown = await fetch(`${cluster.url}/v1/responses/resp_unknown`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { code: "response_not_found" } });
  });

  it("answers 502 when the storing engine is gone (no other engine has the response)", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small" }], {
      health: { probe_interval_seconds: 3600 },
    });
    const id = await stored(cluster.url);
    await cluster.engines.get("small-0")!.close();
    const read = await fetch(`${cluster.url}/v1/responses/${id}`);
    expect(read.status).toBe(502);
    expect(await read.json()).toMatchObject({ error: { code: "upstream_error" } });
  });

  it("refuses a method the route does not have", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small" }]);
    const id = await stored(cluster.url);
    const put = await fetch(`${cluster.url}/v1/responses/${id}`, { method: "PUT" });
    expect(put.status).toBe(405);
  });
});
