// Token budgets per agent (429 with Retry-After), usage captured from streams, client API keys.
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/gateway/client-auth.js";
import { chat, metricValue, scrape, startCluster, type Cluster } from "../helpers/cluster.js";

describe("token budgets", () => {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  it("refuses an agent whose budget is spent with 429 and Retry-After; others and anonymous go on", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small" }], {
      admission: { default_token_budget: 1_000_000, agents: { thrifty: { token_budget: 60 } } },
    });
    const thrifty = { "x-agent-id": "thrifty" };
    const first = await chat(cluster.url, { headers: thrifty, maxTokens: 40 });
    expect(first.status).toBe(200);
    const usage = first.json["usage"] as { prompt_tokens: number; completion_tokens: number };
    expect(usage.prompt_tokens + usage.completion_tokens).toBeGreaterThanOrEqual(60);
    const refused = await chat(cluster.url, { headers: thrifty });
    expect(refused.status).toBe(429);
    expect(refused.json).toMatchObject({ error: { code: "budget_exceeded", type: "rate_limit_error" } });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await chat(cluster.url, { headers: { "x-agent-id": "generous" } })).status).toBe(200);
    expect((await chat(cluster.url)).status).toBe(200);
    expect(
      metricValue(await scrape(cluster.url), "agentserve_rejections_total", { reason: "budget_exceeded" }),
    ).toBe(1);
  });

  it("charges streamed tokens: asks the engine for usage and strips it when the client did not ask", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small" }], {
      admission: { agents: { streamer: { token_budget: 30 } } },
    });
    const plain = await chat(cluster.url, {
      headers: { "x-agent-id": "streamer" },
      stream: true,
      maxTokens: 40,
    });
    expect(plain.status).toBe(200);
    expect(plain.text).not.toContain('"usage":{');
    expect(plain.text).toContain("x_agent_serve");
    expect((await chat(cluster.url, { headers: { "x-agent-id": "streamer" }, stream: true })).status).toBe(
      429,
    );
    const metrics = await scrape(cluster.url);
    // max_tokens 40 did not fit the 30-token budget after the prompt's estimate (28): the engine got 2.
    expect(metricValue(metrics, "agentserve_tokens_total", { tier: "small", kind: "completion" })).toBe(2);
    expect(
      metricValue(metrics, "agentserve_tokens_total", { tier: "small", kind: "prompt" }),
    ).toBeGreaterThan(0);
  });

  it("keeps the usage chunk for a client that asked for it", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small" }]);
    const response = await fetch(`${cluster.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model: "sim-small",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 5,
        stream: true,
        stream_options: { include_usage: true },
      }),
    });
    const text = await response.text();
    const usageEvents = text.split("\n\n").filter((e) => e.includes('"usage":{'));
    expect(usageEvents).toHaveLength(1);
    // The metadata rides on the engine's first chunk, not on the usage chunk.
    expect(text.indexOf("x_agent_serve")).toBeLessThan(text.indexOf('"usage":{'));
  });
});

describe("client API keys", () => {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  it("requires a known key when keys are configured, and charges the key's agent", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small" }], {
      server: { api_keys: [{ sha256: sha256Hex("sk-good-key"), agent_id: "team-a" }] },
      admission: { agents: { "team-a": { token_budget: 40 } } },
    });
    expect((await chat(cluster.url)).status).toBe(401);
    expect((await chat(cluster.url, { headers: { authorization: "Bearer sk-wrong" } })).status).toBe(401);
    const ok = await chat(cluster.url, {
      headers: { authorization: "Bearer sk-good-key", "x-agent-id": "someone-else" },
    });
    expect(ok.status).toBe(200);
    // The key's agent (team-a, budget 40) was charged, not the X-Agent-Id it claimed.
    expect((await chat(cluster.url, { headers: { authorization: "Bearer sk-good-key" } })).status).toBe(429);
    expect((await fetch(`${cluster.url}/healthz`)).status).toBe(200);
  });

  it("sends the engine its own key from the environment, never the client's", async () => {
    const seen: IncomingHttpHeaders[] = [];
    const engine = createServer((req, res) => {
      seen.push(req.headers);
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            id: "x",
            object: "chat.completion",
            choices: [],
            usage: { prompt_tokens: 1, completion_tokens: 1 },
          }),
        );
      });
    });
    await new Promise<void>((resolve) => engine.listen(0, "127.0.0.1", resolve));
    const port = (engine.address() as AddressInfo).port;
    process.env["AGENT_SERVE_TEST_ENGINE_KEY"] = "engine-secret";
    const { parseConfig } = await import("../../src/config/load.js");
    const { Gateway } = await import("../../src/gateway/gateway.js");
    const { pino } = await import("pino");
    const gateway = await Gateway.start(
      parseConfig(
        {
          server: { host: "127.0.0.1", port: 0 },
          health: { probe_interval_seconds: 3600 },
          backends: [
            {
              id: "e",
              tier: "small",
              base_url: `http://127.0.0.1:${port}`,
              model: "m",
              api_key_env: "AGENT_SERVE_TEST_ENGINE_KEY",
            },
          ],
        },
        "test",
      ),
      { logger: pino({ level: "silent" }), listen: { host: "127.0.0.1", port: 0 } },
    );
    try {
      const result = await chat(gateway.url, {
        model: "m",
        headers: { authorization: "Bearer client-secret" },
      });
      expect(result.status).toBe(200);
      const forwarded = seen.find((h) => h["content-type"] === "application/json")!;
      expect(forwarded.authorization).toBe("Bearer engine-secret");
    } finally {
      await gateway.close(0);
      await new Promise((resolve) => engine.close(resolve));
      delete process.env["AGENT_SERVE_TEST_ENGINE_KEY"];
    }
  });
});
