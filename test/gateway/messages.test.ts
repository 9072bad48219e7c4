// The Anthropic Messages API through the gateway, with the official @anthropic-ai/sdk: the same answers as the
// engine gives directly, x_agent_serve where Anthropic clients ignore unknown fields, affinity, budgets, errors.
import Anthropic from "@anthropic-ai/sdk";
import { afterEach, describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/gateway/client-auth.js";
import {
  SMALL_MODEL,
  metricValue,
  scrape,
  startCluster,
  type AgentServeMeta,
  type Cluster,
} from "../helpers/cluster.js";

const SYSTEM = "You are Claude Code, a coding agent. ".repeat(20);
const TOOLS: Anthropic.Tool[] = [
  {
    name: "Bash",
    description: "Run a shell command",
    input_schema: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
  },
];

function metaOfMessage(message: unknown): AgentServeMeta {
  return (message as { x_agent_serve: AgentServeMeta }).x_agent_serve;
}

describe("POST /v1/messages through the gateway", () => {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  function client(url: string, headers: Record<string, string> = {}, apiKey = "unused"): Anthropic {
    return new Anthropic({ baseURL: url, apiKey, maxRetries: 0, defaultHeaders: headers });
  }

  it("keeps a Claude Code session on one engine, named by its own header, JSON and streamed", async () => {
    cluster = await startCluster([0, 1, 2].map((i) => ({ id: `small-${i}`, tier: "small" })));
    const anthropic = client(cluster.url, { "x-claude-code-session-id": "cc-session-1" });
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: "fix the failing test" }];
    const metas: AgentServeMeta[] = [];
    for (let turn = 0; turn < 3; turn++) {
      const reply = await anthropic.messages.create({
        model: SMALL_MODEL,
        max_tokens: 8,
        system: SYSTEM,
        messages,
      });
      metas.push(metaOfMessage(reply));
      messages.push({ role: "assistant", content: reply.content }, { role: "user", content: `more ${turn}` });
      if (turn > 0) expect(reply.usage.cache_read_input_tokens).toBeGreaterThan(0);
    }
    const streamed = anthropic.messages.stream({
      model: SMALL_MODEL,
      max_tokens: 8,
      system: SYSTEM,
      messages,
    });
    let startMeta: AgentServeMeta | undefined;
    stream: for await (const event of streamed) {
      if (event.type === "message_start") {
        startMeta = metaOfMessage(event.message);
        break stream;
      }
    }
    await streamed.finalMessage().catch(() => undefined);
    expect(metas.map((m) => m.affinity_hit)).toEqual([false, true, true]);
    expect(startMeta).toMatchObject({ affinity_hit: true, backend_id: metas[0]!.backend_id });
    expect(new Set(metas.map((m) => m.backend_id)).size).toBe(1);
    expect(metas.every((m) => m.session_source === "header:x-claude-code-session-id")).toBe(true);
  });

  it("answers as the engine does directly (text, tool use, stream), with the metadata added", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small" }]);
    const direct = client(cluster.engines.get("small-0")!.url);
    const through = client(cluster.url);
    const request: Anthropic.MessageCreateParamsNonStreaming = {
      model: SMALL_MODEL,
      max_tokens: 200,
      tools: TOOLS,
      tool_choice: { type: "any" },
      messages: [{ role: "user", content: "list the files" }],
    };
    const a = await direct.messages.create(request);
    const b = await through.messages.create(request);
    const { x_agent_serve: meta, ...rest } = b as Anthropic.Message & { x_agent_serve: AgentServeMeta };
    expect(meta.backend_id).toBe("small-0");
    // Ids differ per answer, and the second of two same prompts reads it from the cache: compare the rest.
    const strip = ({
      x_agent_serve: _meta,
      ...m
    }: Anthropic.Message & { x_agent_serve?: unknown }): unknown => ({
      ...m,
      id: "",
      content: m.content.map((c) => ({ ...c, id: "" })),
      usage: {
        prompt: m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0),
        output: m.usage.output_tokens,
      },
    });
    expect(strip(rest)).toEqual(strip(a));
    expect(b.stop_reason).toBe("tool_use");

    const streamA = await direct.messages.stream({ ...request, stream: true }).finalMessage();
    const streamB = await through.messages.stream({ ...request, stream: true }).finalMessage();
    expect(strip(streamB)).toEqual(strip(streamA));
    // The SDK keeps message_start's message as the final message: the metadata rides along.
    expect(metaOfMessage(streamB).backend_id).toBe("small-0");
  });

  it("charges the agent's budget what the engine reported, streamed or not, and count_tokens nothing", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small" }], {
      admission: { agents: { claude: { token_budget: 1_000_000 } } },
    });
    const anthropic = client(cluster.url, { "x-agent-id": "claude" });
    const json = await anthropic.messages.create({
      model: SMALL_MODEL,
      max_tokens: 5,
      messages: [{ role: "user", content: "hi" }],
    });
    const streamed = await anthropic.messages
      .stream({ model: SMALL_MODEL, max_tokens: 7, messages: [{ role: "user", content: "hi again" }] })
      .finalMessage();
    const counted = await anthropic.messages.countTokens({
      model: SMALL_MODEL,
      messages: [{ role: "user", content: "how many" }],
    });
    expect(counted.input_tokens).toBeGreaterThan(0);
    const metrics = await scrape(cluster.url);
    const prompt = (u: Anthropic.Usage): number => u.input_tokens + (u.cache_read_input_tokens ?? 0);
    expect(metricValue(metrics, "agentserve_tokens_total", { tier: "small", kind: "completion" })).toBe(12);
    expect(metricValue(metrics, "agentserve_tokens_total", { tier: "small", kind: "prompt" })).toBe(
      prompt(json.usage) + prompt(streamed.usage),
    );
  });

  it("refuses in Anthropic's envelope: unknown model, bad JSON, too large, missing key; x-api-key is a key", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small" }], {
      server: { api_keys: [{ sha256: sha256Hex("sk-ant-good"), agent_id: "team" }], max_body_bytes: 4096 },
    });
    const post = async (body: string, headers: Record<string, string>): Promise<[number, unknown]> => {
      const response = await fetch(`${cluster!.url}/v1/messages?beta=true`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body,
      });
      return [response.status, await response.json()];
    };
    const key = { "x-api-key": "sk-ant-good" };
    expect(await post("{}", {})).toEqual([
      401,
      { type: "error", error: { type: "authentication_error", message: expect.any(String) } },
    ]);
    expect((await post("{nope", key))[1]).toMatchObject({
      type: "error",
      error: { type: "invalid_request_error" },
    });
    expect(await post("x".repeat(5000), key)).toMatchObject([413, { error: { type: "request_too_large" } }]);
    const unknown = JSON.stringify({
      model: "no-such",
      max_tokens: 4,
      messages: [{ role: "user", content: "x" }],
    });
    expect(await post(unknown, key)).toMatchObject([
      404,
      { type: "error", error: { type: "not_found_error" } },
    ]);
    const error = await client(cluster.url, {}, "sk-ant-wrong")
      .messages.create({ model: SMALL_MODEL, max_tokens: 4, messages: [{ role: "user", content: "x" }] })
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(error).toBeInstanceOf(Anthropic.AuthenticationError);
    const ok = await client(cluster.url, {}, "sk-ant-good").messages.create({
      model: SMALL_MODEL,
      max_tokens: 4,
      messages: [{ role: "user", content: "x" }],
    });
    expect(ok.type).toBe("message");
  });

  it("relays the engine's own refusal in Anthropic's envelope, which the SDK reads", async () => {
    cluster = await startCluster([{ id: "small-0", tier: "small" }]);
    // A prompt past the engine's 32k context: vLLM (and the simulator) refuse it with a 400.
    const tooLong = {
      model: SMALL_MODEL,
      max_tokens: 16,
      messages: [{ role: "user" as const, content: "word ".repeat(40_000) }],
    };
    const response = await fetch(`${cluster.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(tooLong),
    });
    expect(response.status).toBe(400);
    expect(await response.json()).toEqual({
      type: "error",
      error: { type: "invalid_request_error", message: expect.stringContaining("maximum context length") },
    });
    const error = await client(cluster.url)
      .messages.create(tooLong)
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(error).toBeInstanceOf(Anthropic.BadRequestError);
    expect((error as InstanceType<typeof Anthropic.BadRequestError>).message).toContain(
      "maximum context length",
    );
  });
});
