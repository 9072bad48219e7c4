// The LLM tier classifier against simulated engines: the verdict is the engine's structured answer, cached,
// shared by concurrent identical prompts, and a hung, failing or nonsense engine costs at most the timeout.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { classifierRequestBody } from "../../src/gateway/classifier-client.js";
import { chat, metricValue, scrape, SMALL_MODEL, startCluster, type Cluster } from "../helpers/cluster.js";

const ENGINES = [
  { id: "big-0", tier: "big" },
  { id: "small-0", tier: "small" },
  { id: "router-0", tier: "router", model: "sim-router" },
];
const CLASSIFIER = { routing: { classifier: { enabled: true, tier: "router", timeout_ms: 300 } } };

function outcomes(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const outcome of ["answered", "cached", "timeout", "error", "unparseable"]) {
    out[outcome] = metricValue(text, "agentserve_classifier_requests_total", { outcome });
  }
  return out;
}

/** What the router engine itself answers to the classifier's question, asked directly. */
async function verdictOf(cluster: Cluster, question: string): Promise<string> {
  const tiers = ["small", "big"];
  const body = classifierRequestBody(
    question,
    tiers,
    { tier: "router", model: undefined, prompt: undefined },
    "sim-router",
  );
  const response = await fetch(`${cluster.engines.get("router-0")!.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const json = (await response.json()) as { choices: { message: { content: string } }[] };
  return (JSON.parse(json.choices[0]!.message.content) as { tier: string }).tier;
}

/** A scripted engine: answers /health with {} and every other request with `answer` (200, JSON). */
async function scriptedEngine(answer: object): Promise<Server> {
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(req.url === "/health" ? {} : answer));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", () => resolve()));
  return server;
}

/** The router tier's engine replaced by `engine` (a reload that changes its base_url). */
function routerAt(cluster: Cluster, engine: Server): void {
  const { port } = engine.address() as AddressInfo;
  const backends = cluster.config.backends.map((b) =>
    b.id === "router-0" ? { ...b, base_url: `http://127.0.0.1:${port}` } : b,
  );
  cluster.gateway.reload({ ...cluster.config, backends });
}

describe("the tier classifier", () => {
  let cluster: Cluster | undefined;
  let scripted: Server | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
    await new Promise<void>((resolve) => (scripted ? scripted.close(() => resolve()) : resolve()));
    scripted = undefined;
  });

  it("takes the tier from the engine's structured answer, then from its cache, charging no budget", async () => {
    cluster = await startCluster(ENGINES, {
      ...CLASSIFIER,
      // One short request's hold fits (prompt estimate + max_tokens 8), a second one does not.
      admission: { agents: { tight: { token_budget: 40 } } },
    });
    const prompts = Array.from({ length: 8 }, (_, i) => `task ${i}: summarise the report`);
    const tiersSeen = new Set<string>();
    for (const prompt of prompts) {
      const expected = await verdictOf(cluster, prompt);
      const { status, json } = await chat(cluster.url, {
        model: "auto",
        messages: [{ role: "user", content: prompt }],
      });
      expect(status).toBe(200);
      const meta = json["x_agent_serve"] as { tier: string; tier_source: string };
      expect(meta).toMatchObject({ tier: expected, tier_source: "classifier" });
      tiersSeen.add(meta.tier);
    }
    // The verdict really moves requests: some prompts went to each tier (a constant would not).
    expect([...tiersSeen].sort()).toEqual(["big", "small"]);
    expect(outcomes(await scrape(cluster.url))).toMatchObject({ answered: 8, cached: 0 });

    const again = await chat(cluster.url, {
      model: "auto",
      messages: [{ role: "user", content: prompts[0]! }],
    });
    expect((again.json["x_agent_serve"] as { tier_source: string }).tier_source).toBe("classifier");
    expect(outcomes(await scrape(cluster.url))).toMatchObject({ answered: 8, cached: 1 });

    // An agent's budget sees only its own request's tokens, not the classifier's call.
    const tight = { "x-agent-id": "tight" };
    const first = await chat(cluster.url, {
      model: "auto",
      headers: tight,
      messages: [{ role: "user", content: "fresh" }],
    });
    const usage = first.json["usage"] as { total_tokens: number };
    const refused = await chat(cluster.url, { model: "auto", headers: tight });
    expect(refused.status).toBe(429);
    expect((refused.json["error"] as { message: string }).message).toContain(
      `used ${usage.total_tokens} of its 40 tokens`,
    );
  });

  it("asks once for concurrent identical prompts, and leaves hinted or rule-decided requests alone", async () => {
    cluster = await startCluster(ENGINES, CLASSIFIER);
    const same = { model: "auto", messages: [{ role: "user", content: "the same question" }] };
    const answers = await Promise.all(Array.from({ length: 5 }, () => chat(cluster!.url, same)));
    expect(new Set(answers.map((a) => (a.json["x_agent_serve"] as { tier: string }).tier)).size).toBe(1);
    expect(outcomes(await scrape(cluster.url))).toMatchObject({ answered: 1, cached: 4 });
    const hinted = await chat(cluster.url, { headers: { "x-tier-hint": "small" } });
    expect(hinted.json["x_agent_serve"]).toMatchObject({ tier: "small", tier_source: "hint" });
    const byModel = await chat(cluster.url, { model: SMALL_MODEL });
    expect(byModel.json["x_agent_serve"]).toMatchObject({ tier_source: "model" });
    expect(outcomes(await scrape(cluster.url))).toMatchObject({ answered: 1, cached: 4 });
  });

  it("falls back to the rules' tier within its timeout when the engine hangs or fails", async () => {
    cluster = await startCluster(ENGINES, CLASSIFIER);
    cluster.engines.get("router-0")!.setFault({ kind: "hang" });
    const hung = await chat(cluster.url, { model: "auto", messages: [{ role: "user", content: "hung" }] });
    expect(hung.status).toBe(200);
    expect(hung.json["x_agent_serve"]).toMatchObject({ tier: "small", tier_source: "auto_default" });
    cluster.engines.get("router-0")!.setFault({ kind: "error_rate", rate: 1, status: 500 });
    const failing = await chat(cluster.url, {
      model: "auto",
      messages: [{ role: "user", content: "failing" }],
    });
    expect(failing.json["x_agent_serve"]).toMatchObject({ tier: "small", tier_source: "auto_default" });
    expect(outcomes(await scrape(cluster.url))).toMatchObject({ timeout: 1, error: 1, answered: 0 });
    const text = await scrape(cluster.url);
    expect(metricValue(text, "agentserve_classifier_duration_seconds_count", {})).toBe(2);
  });

  it("falls back when the engine answers nonsense", async () => {
    // An engine that ignores the schema: a scripted server speaking the chat API with free text.
    scripted = await scriptedEngine({
      choices: [{ index: 0, message: { role: "assistant", content: "maybe big?" }, finish_reason: "stop" }],
    });
    cluster = await startCluster(ENGINES, CLASSIFIER);
    routerAt(cluster, scripted);
    const answer = await chat(cluster.url, {
      model: "auto",
      messages: [{ role: "user", content: "nonsense" }],
    });
    expect(answer.status).toBe(200);
    expect(answer.json["x_agent_serve"]).toMatchObject({ tier: "small", tier_source: "auto_default" });
    expect(outcomes(await scrape(cluster.url))).toMatchObject({ unparseable: 1 });
  });

  it("asks through the attempt loop: a failing engine of its tier is failed over and its health hears of it", async () => {
    const engines = [...ENGINES, { id: "router-1", tier: "router", model: "sim-router" }];
    cluster = await startCluster(engines, {
      routing: { classifier: { enabled: true, tier: "router", timeout_ms: 60_000 } },
    });
    cluster.engines.get("router-0")!.setFault({ kind: "error_rate", rate: 1, status: 500 });
    const registry = cluster.gateway.runtime.registry;
    const prompts = Array.from({ length: 6 }, (_, i) => `question ${i}: which tier?`);
    for (const prompt of prompts) {
      const answer = await chat(cluster.url, {
        model: "auto",
        messages: [{ role: "user", content: prompt }],
      });
      expect(answer.status).toBe(200);
      expect(answer.json["x_agent_serve"]).toMatchObject({ tier_source: "classifier" });
    }
    // Every question was answered (router-1 answered those router-0 failed, as retries); router-0's failures
    // reached its health as a request's would: it was ejected.
    expect(outcomes(await scrape(cluster.url))).toMatchObject({ answered: prompts.length, error: 0 });
    const text = await scrape(cluster.url);
    expect(metricValue(text, "agentserve_retries_total", { tier: "router" })).toBeGreaterThan(0);
    expect(
      metricValue(text, "agentserve_backend_ejections_total", { backend: "router-0", cause: "request" }),
    ).toBe(1);
    expect(registry.get("router-0")!.state).toBe("down");
    expect(registry.get("router-1")!.state).toBe("up");
  });

  it("refuses a classifier answer over upstream.max_response_bytes, like any engine answer", async () => {
    // An engine whose verdict comes with a long tail: more bytes than the gateway accepts in an answer.
    scripted = await scriptedEngine({
      choices: [{ index: 0, message: { role: "assistant", content: '{"tier":"big"}' } }],
      padding: "x".repeat(4096),
    });
    cluster = await startCluster(ENGINES, {
      routing: { classifier: { enabled: true, tier: "router", timeout_ms: 60_000 } },
      upstream: { max_response_bytes: 1024, max_attempts: 1 },
    });
    routerAt(cluster, scripted);
    const answer = await chat(cluster.url, { model: "auto", messages: [{ role: "user", content: "long" }] });
    expect(answer.status).toBe(200);
    expect(answer.json["x_agent_serve"]).toMatchObject({ tier: "small", tier_source: "auto_default" });
    expect(outcomes(await scrape(cluster.url))).toMatchObject({ error: 1, answered: 0 });
  });
});
