// The Anthropic Messages API on the real engine (llama.cpp on the CPU), through the gateway with the official
// @anthropic-ai/sdk and straight to the engine: answer shapes, prefix reuse reported as cache_read_input_tokens,
// count_tokens, tool blocks and errors in Anthropic's envelope.
//
// Where node-llama-cpp cannot load the tests are skipped with the engine's own message, except under CI=true.
import Anthropic from "@anthropic-ai/sdk";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it, type TestContext } from "vitest";
import { parseConfig } from "../../src/config/load.js";
import { ensureModel } from "../../src/engine/model-maker.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { stopProcess } from "../helpers/processes.js";
import { spawnRealEngine, type RealEngineProcess } from "../helpers/real-engines.js";

const MODEL = "random-llama-tiny";
const STARTUP_TIMEOUT_MS = 120_000;
const SYSTEM = "You are a careful coding agent. Read before you write. ".repeat(30);
const TOOLS: Anthropic.Tool[] = [
  {
    name: "Bash",
    description: "Run a shell command",
    input_schema: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
  },
];

interface AgentServeMeta {
  backend_id: string;
  affinity_hit: boolean;
}

let engine: RealEngineProcess | undefined;
let gateway: Gateway | undefined;
let unavailable: string | undefined;

beforeAll(async () => {
  const modelPath = await ensureModel("tiny");
  const started = await spawnRealEngine(modelPath, MODEL, ["--threads", "1", "--slots", "2"]);
  if (typeof started === "string") {
    unavailable = started;
    return;
  }
  engine = started;
  const config = parseConfig(
    {
      server: { host: "127.0.0.1", port: 0 },
      backends: [{ id: "small-0", tier: "small", base_url: engine.url, model: MODEL }],
    },
    "test",
  );
  gateway = await Gateway.start(config, {
    logger: pino({ level: process.env["TEST_LOG_LEVEL"] ?? "silent" }),
    listen: { host: "127.0.0.1", port: 0 },
  });
}, STARTUP_TIMEOUT_MS);

afterAll(async () => {
  await gateway?.close(0);
  if (engine) await stopProcess(engine.process);
});

function skipIfUnavailable(context: TestContext): void {
  if (unavailable !== undefined) context.skip();
}

function client(baseURL: string, headers: Record<string, string> = {}): Anthropic {
  return new Anthropic({ baseURL, apiKey: "unused", maxRetries: 0, defaultHeaders: headers });
}

function post(path: string, body: unknown): Promise<Response> {
  return fetch(`${engine!.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
}

describe("POST /v1/messages on the real engine", () => {
  it("streams and answers a two-turn session through the gateway; the second turn reads the slot's prefix", async (context) => {
    skipIfUnavailable(context);
    const anthropic = client(gateway!.url, { "x-session-id": "messages-session" });
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: "Which files changed?" }];

    // Turn 1, streamed: every event of Anthropic's stream, in order.
    const stream = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 8,
      system: SYSTEM,
      messages,
      stream: true,
    });
    const events: Anthropic.RawMessageStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const types = events.map((e) => e.type);
    expect(types[0]).toBe("message_start");
    expect(types.slice(-2)).toEqual(["message_delta", "message_stop"]);
    expect(types[1]).toBe("content_block_start");
    expect(types.at(-3)).toBe("content_block_stop");
    expect(types.slice(2, -3).every((t) => t === "content_block_delta")).toBe(true);
    const start = events[0] as Anthropic.RawMessageStartEvent;
    expect(start.message).toMatchObject({ type: "message", role: "assistant", model: MODEL, content: [] });
    expect(start.message.id).toMatch(/^msg_/);
    expect(start.message.usage).toMatchObject({ cache_read_input_tokens: 0 });
    const promptTokens = start.message.usage.input_tokens;
    expect(promptTokens).toBeGreaterThan(300); // the system prompt is real BPE tokens
    const meta = (start.message as unknown as { x_agent_serve: AgentServeMeta }).x_agent_serve;
    expect(meta).toMatchObject({ backend_id: "small-0", affinity_hit: false });
    const delta = events.at(-2) as Anthropic.RawMessageDeltaEvent;
    // The generated model never writes end-of-turn: the reply runs to max_tokens.
    expect(delta.delta.stop_reason).toBe("max_tokens");
    expect(delta.usage.output_tokens).toBe(8);
    const text = events
      .filter((e): e is Anthropic.RawContentBlockDeltaEvent => e.type === "content_block_delta")
      .map((e) => (e.delta.type === "text_delta" ? e.delta.text : ""))
      .join("");
    expect(text.length).toBeGreaterThan(0);

    // Turn 2, not streamed: the same engine, whose slot holds turn 1's conversation.
    messages.push({ role: "assistant", content: text }, { role: "user", content: "And the fix?" });
    const second = await anthropic.messages.create({ model: MODEL, max_tokens: 4, system: SYSTEM, messages });
    expect(second).toMatchObject({
      type: "message",
      role: "assistant",
      model: MODEL,
      stop_reason: "max_tokens",
      stop_sequence: null,
      usage: { output_tokens: 4, cache_creation_input_tokens: 0 },
    });
    expect(second.content).toHaveLength(1);
    expect(second.content[0]!.type).toBe("text");
    expect((second.content[0] as Anthropic.TextBlock).text.length).toBeGreaterThan(0);
    expect(second.usage.cache_read_input_tokens).toBeGreaterThanOrEqual(promptTokens);
    expect(second.usage.input_tokens).toBeGreaterThan(0);
    const secondMeta = (second as unknown as { x_agent_serve: AgentServeMeta }).x_agent_serve;
    expect(secondMeta).toMatchObject({ backend_id: "small-0", affinity_hit: true });

    // count_tokens through the gateway counts the prompt as the engine renders it.
    const counted = await anthropic.messages.countTokens({ model: MODEL, system: SYSTEM, messages });
    expect(counted.input_tokens).toBe(second.usage.input_tokens + second.usage.cache_read_input_tokens!);

    // The engine's refusal reaches the SDK through the gateway as Anthropic's error.
    const tooLong = anthropic.messages.create({ model: MODEL, max_tokens: 5000, system: SYSTEM, messages });
    await expect(tooLong).rejects.toBeInstanceOf(Anthropic.BadRequestError);
    await expect(tooLong).rejects.toMatchObject({
      status: 400,
      error: { type: "error", error: { type: "invalid_request_error" } },
    });
  });

  it("renders tools, tool_use and tool_result blocks into the prompt, and refuses in Anthropic's envelope", async (context) => {
    skipIfUnavailable(context);
    const history: Anthropic.MessageParam[] = [
      { role: "user", content: [{ type: "text", text: "Run the tests." }] },
      {
        role: "assistant",
        content: [
          { type: "text", text: "Running them." },
          { type: "tool_use", id: "toolu_1", name: "Bash", input: { command: "npm test" } },
        ],
      },
      {
        role: "user",
        content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "2 passed, 1 failed" }],
      },
    ];
    const system = [{ type: "text", text: SYSTEM }];
    const count = async (body: Record<string, unknown>): Promise<number> => {
      const response = await post("/v1/messages/count_tokens", { model: MODEL, system, ...body });
      expect(response.status).toBe(200);
      return ((await response.json()) as { input_tokens: number }).input_tokens;
    };
    const bare = await count({ messages: [history[0]] });
    const withTools = await count({ messages: [history[0]], tools: TOOLS });
    const withHistory = await count({ messages: history, tools: TOOLS });
    expect(withTools).toBeGreaterThan(bare);
    expect(withHistory).toBeGreaterThan(withTools);

    const reply = await post("/v1/messages", {
      model: MODEL,
      max_tokens: 3,
      system,
      tools: TOOLS,
      messages: history,
    });
    expect(reply.status).toBe(200);
    const body = (await reply.json()) as Anthropic.Message;
    expect(body.usage.input_tokens + body.usage.cache_read_input_tokens!).toBe(withHistory);
    expect(body.usage.output_tokens).toBe(3);
    expect(body.content.map((block) => block.type)).toEqual(["text"]);

    for (const [request, status, type] of [
      [{ model: "nope", max_tokens: 4, messages: history }, 404, "not_found_error"],
      [{ model: MODEL, messages: history }, 400, "invalid_request_error"],
      [{ model: MODEL, max_tokens: 5000, messages: history }, 400, "invalid_request_error"],
      [
        { model: MODEL, max_tokens: 4, messages: history, tools: [{ name: "web_search" }] },
        400,
        "invalid_request_error",
      ],
    ] as const) {
      const refused = await post("/v1/messages", request);
      expect(refused.status).toBe(status);
      expect(await refused.json()).toMatchObject({ type: "error", error: { type } });
    }
  });
});
