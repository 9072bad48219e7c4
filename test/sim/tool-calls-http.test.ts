// Tool calls over real HTTP through the openai SDK: hermes-style answers, their streamed deltas, tool_choice,
// parallel calls, schema-valid arguments, and the prefix cache across a tool round trip.
import { Ajv } from "ajv";
import OpenAI from "openai";
import type {
  ChatCompletion,
  ChatCompletionChunk,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from "openai/resources/chat/completions";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";

const WEATHER: ChatCompletionTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather for a city",
    parameters: {
      type: "object",
      properties: {
        city: { type: "string", minLength: 2 },
        unit: { type: "string", enum: ["celsius", "fahrenheit"] },
        days: { type: "integer", minimum: 1, maximum: 7 },
        when: {
          type: "object",
          properties: { hour: { type: "integer", minimum: 0, maximum: 23 }, tz: { type: "string" } },
          required: ["hour"],
        },
        tags: { type: "array", items: { type: "string" }, minItems: 1, maxItems: 2 },
      },
      required: ["city", "unit", "days", "when", "tags"],
      additionalProperties: false,
    },
  },
};

const SEARCH: ChatCompletionTool = {
  type: "function",
  function: {
    name: "search_docs",
    parameters: {
      type: "object",
      properties: { query: { type: "string" }, limit: { type: "number", exclusiveMinimum: 0, maximum: 1 } },
      required: ["query", "limit"],
    },
  },
};

const TOOLS = [WEATHER, SEARCH];
const ajv = new Ajv({ strict: false, validateFormats: false });

function schemaOf(name: string): object {
  const tool = TOOLS.find((t) => t.type === "function" && t.function.name === name);
  if (!tool || tool.type !== "function") throw new Error(`no tool ${name}`);
  return tool.function.parameters ?? {};
}

function expectValidArguments(name: string, args: string): void {
  const validate = ajv.compile(schemaOf(name));
  const ok = validate(JSON.parse(args));
  expect(validate.errors ?? [], args).toEqual([]);
  expect(ok).toBe(true);
}

const SYSTEM = "You are a careful agent. Use tools when they help. ".repeat(8);

function userTurn(text: string): ChatCompletionMessageParam[] {
  return [
    { role: "system", content: SYSTEM },
    { role: "user", content: text },
  ];
}

/** A tool call's fields as the client ends up with them, whether it came whole or in fragments. */
interface AssembledCall {
  id: string;
  type: string;
  name: string;
  arguments: string;
}

/** Reassembles a streamed choice the way a client must: content concatenated, tool calls by index. */
function reassemble(chunks: ChatCompletionChunk[]): {
  content: string;
  calls: AssembledCall[];
  finish: string | null;
} {
  let content = "";
  let finish: string | null = null;
  const calls: AssembledCall[] = [];
  for (const chunk of chunks) {
    for (const choice of chunk.choices) {
      content += choice.delta.content ?? "";
      for (const delta of choice.delta.tool_calls ?? []) {
        const call = (calls[delta.index] ??= { id: "", type: "", name: "", arguments: "" });
        if (delta.id) call.id = delta.id;
        if (delta.type) call.type = delta.type;
        if (delta.function?.name) call.name += delta.function.name;
        call.arguments += delta.function?.arguments ?? "";
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  return { content, calls, finish };
}

function callsOf(reply: ChatCompletion): AssembledCall[] {
  return (reply.choices[0]!.message.tool_calls ?? []).map((call) => {
    if (call.type !== "function") throw new Error("expected a function call");
    return { id: call.id, type: call.type, name: call.function.name, arguments: call.function.arguments };
  });
}

function hermesText(calls: AssembledCall[]): string {
  return calls
    .map(
      (call) =>
        `<tool_call>\n{"name": ${JSON.stringify(call.name)}, "arguments": ${call.arguments}}\n</tool_call>`,
    )
    .join("\n");
}

describe("tool calls (one call per message)", () => {
  let engine: SimEngineHandle;
  let client: OpenAI;

  beforeAll(async () => {
    engine = await startSimEngine({ profile: "instant", seed: 5 });
    client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });
  afterAll(async () => {
    await engine.close();
  });

  const base = (text: string): ChatCompletionCreateParamsNonStreaming => ({
    model: engine.model,
    messages: userTurn(text),
    tools: TOOLS,
  });

  it("answers a user turn with a hermes tool call whose arguments fit the schema, counted in usage", async () => {
    const reply = await client.chat.completions.create(base("Weather in Paris for three days?"));
    const choice = reply.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBeNull();
    const calls = callsOf(reply);
    expect(calls).toHaveLength(1);
    expect(calls[0]!.id).toMatch(/^chatcmpl-tool-[0-9a-f]{32}$/);
    expect(calls[0]!.type).toBe("function");
    expectValidArguments(calls[0]!.name, calls[0]!.arguments);
    // The engine generated the hermes block token by token, then end-of-turn.
    expect(reply.usage!.completion_tokens).toBe(Math.ceil(hermesText(calls).length / 4) + 1);
  });

  it("is deterministic for the same request and seed", async () => {
    const first = callsOf(await client.chat.completions.create({ ...base("Same question twice"), seed: 9 }));
    const second = callsOf(await client.chat.completions.create({ ...base("Same question twice"), seed: 9 }));
    const other = callsOf(await client.chat.completions.create({ ...base("Same question twice"), seed: 10 }));
    expect(second.map((c) => [c.name, c.arguments])).toEqual(first.map((c) => [c.name, c.arguments]));
    expect(second[0]!.id).not.toBe(first[0]!.id);
    expect(other.map((c) => c.arguments)).not.toEqual(first.map((c) => c.arguments));
  });

  it("streams the call as vLLM does: id, type and name first, then argument fragments, then tool_calls", async () => {
    const request = base("Stream the weather lookup");
    const whole = await client.chat.completions.create(request);
    const stream = await client.chat.completions.create({
      ...request,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: "assistant", content: "" });
    const deltas = chunks.flatMap((c) => c.choices.flatMap((choice) => choice.delta.tool_calls ?? []));
    expect(deltas[0]).toMatchObject({
      index: 0,
      type: "function",
      function: { name: callsOf(whole)[0]!.name },
    });
    expect(deltas[0]!.id).toMatch(/^chatcmpl-tool-/);
    expect(deltas[0]!.function!.arguments).toBeUndefined();
    const fragments = deltas.slice(1);
    expect(fragments.length).toBeGreaterThan(2);
    for (const fragment of fragments) {
      expect(fragment.id).toBeUndefined();
      expect(fragment.function!.name).toBeUndefined();
      expect(typeof fragment.function!.arguments).toBe("string");
    }
    const streamed = reassemble(chunks);
    expect(streamed.content).toBe("");
    expect(streamed.finish).toBe("tool_calls");
    expect(streamed.calls.map(({ name, arguments: a, type }) => ({ name, a, type }))).toEqual(
      callsOf(whole).map(({ name, arguments: a, type }) => ({ name, a, type })),
    );
    expect(chunks.at(-1)!.usage!.completion_tokens).toBe(whole.usage!.completion_tokens);
  });

  it("gives the SDK's stream helper a final completion with the same tool calls", async () => {
    const request = base("Helper please");
    const whole = await client.chat.completions.create(request);
    const runner = client.chat.completions.stream({ ...request, stream: true });
    const final = await runner.finalChatCompletion();
    expect(final.choices[0]!.finish_reason).toBe("tool_calls");
    const finalCalls = (final.choices[0]!.message.tool_calls ?? []).map((c) =>
      c.type === "function" ? [c.function.name, c.function.arguments] : [],
    );
    expect(finalCalls).toEqual(callsOf(whole).map((c) => [c.name, c.arguments]));
  });

  it("answers in text after a tool result, reusing the cached tool-call turn", async () => {
    const first = await client.chat.completions.create(base("Check Tokyo"));
    const call = first.choices[0]!.message.tool_calls![0]!;
    const followUp = await client.chat.completions.create({
      ...base("Check Tokyo"),
      messages: [
        ...userTurn("Check Tokyo"),
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: '{"temp": 21}' },
      ],
    });
    expect(followUp.choices[0]!.finish_reason).toBe("stop");
    expect(followUp.choices[0]!.message.tool_calls).toEqual([]);
    expect(followUp.choices[0]!.message.content!.length).toBeGreaterThan(0);
    // The tool-call turn re-renders to the very tokens the engine generated, so its blocks are reused; only the
    // end-of-turn token (sampled, never computed) and the partial last block are not.
    const reusable = first.usage!.prompt_tokens + first.usage!.completion_tokens - 1;
    expect(followUp.usage!.prompt_tokens_details!.cached_tokens).toBe(Math.floor(reusable / 16) * 16);
  });

  it("honours tool_choice none, required and a named function", async () => {
    const none = await client.chat.completions.create({ ...base("No tools now"), tool_choice: "none" });
    expect(none.choices[0]!.finish_reason).toBe("stop");
    expect(none.choices[0]!.message.tool_calls).toEqual([]);

    const required = await client.chat.completions.create({ ...base("Must call"), tool_choice: "required" });
    expect(required.choices[0]!.finish_reason).toBe("tool_calls");
    expect(required.choices[0]!.message.content).toBe("");
    for (const call of callsOf(required)) expectValidArguments(call.name, call.arguments);

    const named = await client.chat.completions.create({
      ...base("Search the docs"),
      tool_choice: { type: "function", function: { name: "search_docs" } },
    });
    // vLLM (like OpenAI) ends a named call with "stop".
    expect(named.choices[0]!.finish_reason).toBe("stop");
    const namedCalls = callsOf(named);
    expect(namedCalls.map((c) => c.name)).toEqual(["search_docs"]);
    expectValidArguments("search_docs", namedCalls[0]!.arguments);
    // Guided decoding wrote only the arguments object.
    expect(named.usage!.completion_tokens).toBe(Math.ceil(namedCalls[0]!.arguments.length / 4) + 1);

    const namedStream = await client.chat.completions.create({
      ...base("Search the docs"),
      tool_choice: { type: "function", function: { name: "search_docs" } },
      stream: true,
    });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of namedStream) chunks.push(chunk);
    const streamed = reassemble(chunks);
    expect(streamed.finish).toBe("stop");
    expect(streamed.calls.map((c) => [c.name, c.arguments])).toEqual([
      ["search_docs", namedCalls[0]!.arguments],
    ]);
  });

  it("rejects a named tool that was not offered, and tool_choice without tools", async () => {
    const unknown = await fetch(`${engine.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        messages: [{ role: "user", content: "x" }],
        tools: TOOLS,
        tool_choice: { type: "function", function: { name: "nope" } },
      }),
    });
    expect(unknown.status).toBe(400);
    expect(((await unknown.json()) as { error: { param: string } }).error.param).toBe("tool_choice");
    const missing = await fetch(`${engine.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "x" }], tool_choice: "required" }),
    });
    expect(missing.status).toBe(400);
  });

  it("cuts a call short at max_tokens: finish length, the partial text as content, no tool_calls", async () => {
    const reply = await client.chat.completions.create({ ...base("Short budget"), max_tokens: 5 });
    expect(reply.choices[0]!.finish_reason).toBe("length");
    expect(reply.choices[0]!.message.tool_calls).toEqual([]);
    expect(reply.choices[0]!.message.content).toBe('<tool_call>\n{"name": '.slice(0, 20));
    expect(reply.usage!.completion_tokens).toBe(5);
  });
});

describe("parallel tool calls", () => {
  let engine: SimEngineHandle;
  let client: OpenAI;

  beforeAll(async () => {
    engine = await startSimEngine({ profile: "instant", seed: 8, parallelToolCallRate: 1 });
    client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: "unused", maxRetries: 0 });
  });
  afterAll(async () => {
    await engine.close();
  });

  it("puts several calls in one message, streamed by index, each valid for its schema", async () => {
    const request: ChatCompletionCreateParamsNonStreaming = {
      model: engine.model,
      messages: userTurn("Weather in Oslo and Rome, and search the docs"),
      tools: TOOLS,
    };
    const whole = await client.chat.completions.create(request);
    const calls = callsOf(whole);
    expect(calls).toHaveLength(3);
    expect(new Set(calls.map((c) => c.id)).size).toBe(3);
    for (const call of calls) expectValidArguments(call.name, call.arguments);
    expect(whole.usage!.completion_tokens).toBe(Math.ceil(hermesText(calls).length / 4) + 1);

    const stream = await client.chat.completions.create({ ...request, stream: true });
    const chunks: ChatCompletionChunk[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    const streamed = reassemble(chunks);
    expect(streamed.finish).toBe("tool_calls");
    expect(streamed.calls.map((c) => [c.name, c.arguments])).toEqual(calls.map((c) => [c.name, c.arguments]));
    const firstDeltaIndexes = chunks
      .flatMap((c) => c.choices.flatMap((choice) => choice.delta.tool_calls ?? []))
      .filter((d) => d.id !== undefined)
      .map((d) => d.index);
    expect(firstDeltaIndexes).toEqual([0, 1, 2]);
  });

  it("makes one call when parallel_tool_calls is false", async () => {
    const reply = await client.chat.completions.create({
      model: engine.model,
      messages: userTurn("Only one at a time"),
      tools: TOOLS,
      parallel_tool_calls: false,
    });
    expect(callsOf(reply)).toHaveLength(1);
  });
});
