// The simulator's Anthropic Messages API, through the official @anthropic-ai/sdk: JSON, streams, tools, count_tokens.
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";

const MODEL = "Qwen/Qwen2.5-7B-Instruct";
const SYSTEM = "You are a careful coding agent. ".repeat(30);
const TOOLS: Anthropic.Tool[] = [
  {
    name: "Bash",
    description: "Run a shell command",
    input_schema: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
  },
];

/** vLLM's ignore_eos (a body field on /v1/messages too): these tests count on replies of exactly max_tokens. */
const EXACT = { ignore_eos: true } as object;

describe("simulated engine: POST /v1/messages", () => {
  let engine: SimEngineHandle;
  let client: Anthropic;
  beforeAll(async () => {
    engine = await startSimEngine({ model: MODEL });
    client = new Anthropic({ baseURL: engine.url, apiKey: "unused", maxRetries: 0 });
  });
  afterAll(() => engine.close());

  it("answers a message, and a second turn reads the first one's prompt from the prefix cache", async () => {
    const first = await client.messages.create({
      model: MODEL,
      max_tokens: 12,
      ...EXACT,
      system: SYSTEM,
      messages: [{ role: "user", content: "hello" }],
    });
    expect(first.type).toBe("message");
    expect(first.role).toBe("assistant");
    expect(first.content[0]).toMatchObject({ type: "text" });
    expect(first.stop_reason).toBe("max_tokens");
    expect(first.usage.output_tokens).toBe(12);
    expect(first.usage.cache_read_input_tokens).toBe(0);
    const text = (first.content[0] as Anthropic.TextBlock).text;
    const second = await client.messages.create({
      model: MODEL,
      max_tokens: 4,
      system: SYSTEM,
      messages: [
        { role: "user", content: "hello" },
        { role: "assistant", content: text },
        { role: "user", content: "and then?" },
      ],
    });
    expect(second.usage.cache_read_input_tokens).toBeGreaterThan(first.usage.input_tokens / 2);
    // The prompt is input plus cached: a longer conversation than the first turn's.
    expect(second.usage.input_tokens + second.usage.cache_read_input_tokens!).toBeGreaterThan(
      first.usage.input_tokens,
    );
  });

  it("streams message_start, content blocks, message_delta and message_stop that the SDK assembles", async () => {
    const stream = client.messages.stream({
      model: MODEL,
      max_tokens: 8,
      ...EXACT,
      messages: [{ role: "user", content: "stream please" }],
    });
    const types: string[] = [];
    stream.on("streamEvent", (event) => types.push(event.type));
    const message = await stream.finalMessage();
    expect(types[0]).toBe("message_start");
    expect(types).toContain("content_block_delta");
    expect(types.slice(-2)).toEqual(["message_delta", "message_stop"]);
    expect(message.usage.output_tokens).toBe(8);
    expect((message.content[0] as Anthropic.TextBlock).text.length).toBeGreaterThan(0);
  });

  it("calls a tool (JSON and streamed) with stop_reason tool_use, and takes the tool_result back", async () => {
    const called = await client.messages.create({
      model: MODEL,
      max_tokens: 200,
      tools: TOOLS,
      tool_choice: { type: "any" },
      messages: [{ role: "user", content: "list the files" }],
    });
    expect(called.stop_reason).toBe("tool_use");
    const use = called.content.find((b): b is Anthropic.ToolUseBlock => b.type === "tool_use")!;
    expect(use.name).toBe("Bash");
    expect(typeof (use.input as { command?: unknown }).command).toBe("string");

    const streamed = await client.messages
      .stream({
        model: MODEL,
        max_tokens: 200,
        tools: TOOLS,
        tool_choice: { type: "any" },
        messages: [{ role: "user", content: "list the files" }],
      })
      .finalMessage();
    expect(streamed.stop_reason).toBe("tool_use");
    expect(streamed.content.find((b) => b.type === "tool_use")).toMatchObject({ name: "Bash" });

    const answered = await client.messages.create({
      model: MODEL,
      max_tokens: 6,
      tools: TOOLS,
      messages: [
        { role: "user", content: "list the files" },
        { role: "assistant", content: [use] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "a.txt b.txt" }] },
      ],
    });
    expect(answered.content[0]).toMatchObject({ type: "text" });
  });

  it("counts tokens, and refuses bad requests in Anthropic's error envelope", async () => {
    const counted = await client.messages.countTokens({
      model: MODEL,
      messages: [{ role: "user", content: "count me" }],
    });
    expect(counted.input_tokens).toBeGreaterThan(2);

    const raw = await fetch(`${engine.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "no max_tokens" }] }),
    });
    expect(raw.status).toBe(400);
    expect(await raw.json()).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });

    const error = await client.messages
      .create({ model: "other-model", max_tokens: 4, messages: [{ role: "user", content: "x" }] })
      .then(
        () => undefined,
        (err: unknown) => err,
      );
    expect(error).toBeInstanceOf(Anthropic.NotFoundError);
  });
});
