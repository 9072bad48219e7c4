// The HTTP surface against the official openai SDK and raw requests: shapes, usage, errors, metrics, disconnects.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";
import { waitUntil } from "../helpers/wait.js";

let engine: SimEngineHandle;
let client: OpenAI;

beforeAll(async () => {
  engine = await startSimEngine({ profile: "instant", seed: 11 });
  client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: "unused", maxRetries: 0 });
});

afterAll(async () => {
  await engine.close();
});

function post(path: string, body: string | object): Promise<Response> {
  return fetch(`${engine.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

/** vLLM's ignore_eos: these tests count on replies of exactly max_tokens tokens. */
const EXACT = { ignore_eos: true } as object;

const SYSTEM = "You are a terse assistant that answers in one line. ".repeat(20);

describe("chat completions through the openai SDK", () => {
  it("parses a non-streaming answer with usage and cached tokens", async () => {
    const messages = [
      { role: "system" as const, content: SYSTEM },
      { role: "user" as const, content: "First question, asked twice." },
    ];
    const first = await client.chat.completions.create({
      ...EXACT,
      model: engine.model,
      messages,
      max_tokens: 12,
    });
    expect(first.object).toBe("chat.completion");
    expect(first.id).toMatch(/^chatcmpl-/);
    expect(first.model).toBe(engine.model);
    expect(first.choices[0]!.message.role).toBe("assistant");
    expect(first.choices[0]!.message.content).toHaveLength(12 * 4);
    expect(first.choices[0]!.finish_reason).toBe("length");
    expect(first.usage!.completion_tokens).toBe(12);
    expect(first.usage!.prompt_tokens_details!.cached_tokens).toBe(0);

    const second = await client.chat.completions.create({
      ...EXACT,
      model: engine.model,
      messages,
      max_tokens: 12,
    });
    const prompt = second.usage!.prompt_tokens;
    expect(second.usage!.prompt_tokens_details!.cached_tokens).toBe(Math.floor((prompt - 1) / 16) * 16);
    expect(second.choices[0]!.message.content).toBe(first.choices[0]!.message.content);
  });

  it("streams role, content deltas, a finish reason, usage and [DONE]", async () => {
    const stream = await client.chat.completions.create({
      ...EXACT,
      model: engine.model,
      messages: [{ role: "user", content: "Stream this please." }],
      max_tokens: 5,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    expect(chunks[0]!.object).toBe("chat.completion.chunk");
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: "assistant", content: "" });
    const content = chunks.flatMap((c) => c.choices.map((choice) => choice.delta.content ?? "")).join("");
    expect(content).toHaveLength(5 * 4);
    const finishes = chunks
      .flatMap((c) => c.choices.map((choice) => choice.finish_reason))
      .filter((r) => r !== null);
    expect(finishes).toEqual(["length"]);
    const last = chunks.at(-1)!;
    expect(last.choices).toEqual([]);
    expect(last.usage).toMatchObject({ completion_tokens: 5, total_tokens: last.usage!.prompt_tokens + 5 });
  });

  it("ends with finish_reason stop and a reply of the stop distribution when max_tokens is absent", async () => {
    const reply = await client.chat.completions.create({
      model: engine.model,
      messages: [{ role: "user", content: "No limit given." }],
    });
    expect(reply.choices[0]!.finish_reason).toBe("stop");
    // The end-of-turn token counts as generated but adds no text.
    expect(reply.choices[0]!.message.content).toHaveLength((reply.usage!.completion_tokens - 1) * 4);
  });

  it("accepts tool definitions and tool-call history", async () => {
    const reply = await client.chat.completions.create({
      ...EXACT,
      model: engine.model,
      tools: [{ type: "function", function: { name: "read_file", parameters: { type: "object" } } }],
      tool_choice: "auto",
      temperature: 0.2,
      messages: [
        { role: "user", content: "Open a.txt" },
        {
          role: "assistant",
          content: null,
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "read_file", arguments: '{"p":"a.txt"}' } },
          ],
        },
        { role: "tool", tool_call_id: "call_1", content: "hello" },
      ],
      max_tokens: 3,
    });
    expect(reply.choices[0]!.finish_reason).toBe("length");
  });

  it("returns n choices", async () => {
    const reply = await client.chat.completions.create({
      ...EXACT,
      model: engine.model,
      messages: [{ role: "user", content: "Two takes." }],
      max_tokens: 4,
      n: 2,
    });
    expect(reply.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(reply.usage!.completion_tokens).toBe(8);
  });
});

describe("completions through the openai SDK", () => {
  it("parses both response modes", async () => {
    const whole = await client.completions.create({
      ...EXACT,
      model: engine.model,
      prompt: "Once upon a time",
      max_tokens: 6,
    });
    expect(whole.object).toBe("text_completion");
    expect(whole.choices[0]!.text).toHaveLength(24);
    expect(whole.usage).toMatchObject({ prompt_tokens: 4, completion_tokens: 6 });

    const stream = await client.completions.create({
      ...EXACT,
      model: engine.model,
      prompt: [1, 2, 3, 4, 5],
      max_tokens: 3,
      stream: true,
      stream_options: { include_usage: true },
    });
    const texts: string[] = [];
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of stream) {
      texts.push(...chunk.choices.map((c) => c.text));
      usage = chunk.usage ?? usage;
    }
    expect(texts.join("")).toHaveLength(12);
    expect(usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 3 });
  });
});

describe("completions batches", () => {
  it("answers a list of prompts with one choice each and sums their usage", async () => {
    const res = await post("/v1/completions", { prompt: ["abcd", "efghijkl"], max_tokens: 2 });
    const body = (await res.json()) as { choices: { index: number }[]; usage: { prompt_tokens: number } };
    expect(body.choices.map((c) => c.index)).toEqual([0, 1]);
    expect(body.usage.prompt_tokens).toBe(3);
  });
});

describe("other routes", () => {
  it("lists the served model in vLLM's shape", async () => {
    const models = await client.models.list();
    expect(models.data.map((m) => m.id)).toEqual([engine.model]);
    const raw = (await (await fetch(`${engine.url}/v1/models`)).json()) as {
      data: Record<string, unknown>[];
    };
    expect(raw.data[0]).toMatchObject({
      object: "model",
      owned_by: "vllm",
      max_model_len: 32768,
      root: engine.model,
    });
  });

  it("answers /health with an empty 200", async () => {
    const res = await fetch(`${engine.url}/health`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("");
  });

  it("answers unknown routes and wrong methods like FastAPI", async () => {
    expect((await fetch(`${engine.url}/v2/nothing`)).status).toBe(404);
    expect((await fetch(`${engine.url}/__proto__`)).status).toBe(404);
    expect((await fetch(`${engine.url}/v1/chat/completions`)).status).toBe(405);
  });
});

describe("vLLM-style errors", () => {
  async function expectError(res: Response, status: number, type: string): Promise<string> {
    expect(res.status).toBe(status);
    const body = (await res.json()) as Record<string, unknown> & { error: Record<string, unknown> };
    expect(body).toMatchObject({ object: "error", type, code: status });
    expect(body.error).toMatchObject({ type, code: status, message: body["message"] });
    return body["message"] as string;
  }

  it("rejects malformed JSON with 400", async () => {
    expect(
      await expectError(await post("/v1/chat/completions", "{not json"), 400, "BadRequestError"),
    ).toMatch(/JSON/);
  });

  it("rejects missing or mistyped fields with 400", async () => {
    await expectError(await post("/v1/chat/completions", { model: engine.model }), 400, "BadRequestError");
    await expectError(
      await post("/v1/chat/completions", { messages: [{ role: "user", content: 5 }] }),
      400,
      "BadRequestError",
    );
    await expectError(
      await post("/v1/chat/completions", { messages: [{ role: "user", content: "x" }], max_tokens: "ten" }),
      400,
      "BadRequestError",
    );
    await expectError(
      await post("/v1/chat/completions", { messages: [{ role: "user", content: "x" }], stream_options: {} }),
      400,
      "BadRequestError",
    );
    await expectError(await post("/v1/completions", { max_tokens: 3 }), 400, "BadRequestError");
  });

  it("rejects max_tokens beyond the context window with 400", async () => {
    const message = await expectError(
      await post("/v1/chat/completions", { messages: [{ role: "user", content: "x" }], max_tokens: 40_000 }),
      400,
      "BadRequestError",
    );
    expect(message).toMatch(/maximum context length is 32768 tokens/);
  });

  it("answers an unknown model with 404, which the SDK maps to NotFoundError", async () => {
    await expectError(
      await post("/v1/chat/completions", { model: "gpt-4o", messages: [{ role: "user", content: "x" }] }),
      404,
      "NotFoundError",
    );
    await expect(
      client.chat.completions.create({ model: "nope", messages: [{ role: "user", content: "x" }] }),
    ).rejects.toBeInstanceOf(OpenAI.NotFoundError);
  });
});

describe("metrics", () => {
  function sample(text: string, name: string, labels = ""): number {
    const line = text.split("\n").find((l) => l.startsWith(`${name}{`) && l.includes(labels));
    if (!line) throw new Error(`no sample ${name}`);
    return Number(line.slice(line.lastIndexOf(" ") + 1));
  }

  it("agrees with the requests served", async () => {
    const own = await startSimEngine({ profile: "instant", seed: 5 });
    try {
      const c = new OpenAI({ baseURL: `${own.url}/v1`, apiKey: "unused", maxRetries: 0 });
      const prompts: number[] = [];
      const cached: number[] = [];
      for (let i = 0; i < 4; i++) {
        const reply = await c.chat.completions.create({
          model: own.model,
          messages: [
            { role: "system", content: SYSTEM },
            { role: "user", content: `question ${i % 2}` },
          ],
          max_tokens: 7,
          ...EXACT,
        });
        prompts.push(reply.usage!.prompt_tokens);
        cached.push(reply.usage!.prompt_tokens_details!.cached_tokens!);
      }
      const text = await (await fetch(`${own.url}/metrics`)).text();
      const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0);
      expect(sample(text, "vllm:prompt_tokens_total")).toBe(sum(prompts));
      expect(sample(text, "vllm:prefix_cache_queries_total")).toBe(sum(prompts));
      expect(sample(text, "vllm:prefix_cache_hits_total")).toBe(sum(cached));
      expect(sample(text, "vllm:generation_tokens_total")).toBe(28);
      expect(sample(text, "vllm:request_success_total", 'finished_reason="length"')).toBe(4);
      expect(sample(text, "vllm:time_to_first_token_seconds_count")).toBe(4);
      expect(sample(text, "vllm:e2e_request_latency_seconds_count")).toBe(4);
      expect(sample(text, "vllm:num_requests_running")).toBe(0);
      expect(sample(text, "vllm:num_requests_waiting")).toBe(0);
      expect(sample(text, "vllm:kv_cache_usage_perc")).toBe(0);
      expect(sample(text, "vllm:gpu_cache_usage_perc")).toBe(0);
      expect(text).toContain(`model_name="${own.model}"`);
      const stats = own.stats();
      expect(stats).toMatchObject({
        requestsServed: 4,
        promptTokens: sum(prompts),
        cachedTokens: sum(cached),
      });
      expect(stats.completionTokens).toBe(28);
    } finally {
      await own.close();
    }
  });
});

describe("client disconnect", () => {
  it("aborts the request in the engine and frees its blocks", async () => {
    const slow = await startSimEngine({ profile: "qwen2.5-7b", timeScale: 1 });
    try {
      const controller = new AbortController();
      const res = await fetch(`${slow.url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify({
          messages: [{ role: "user", content: "long answer" }],
          max_tokens: 2000,
          stream: true,
        }),
        signal: controller.signal,
      });
      const reader = res.body!.getReader();
      await reader.read();
      expect(slow.stats().running).toBe(1);
      expect(slow.stats().kvCacheUsage).toBeGreaterThan(0);
      controller.abort();
      // The abort reaches the engine with the socket's close; the engine says when its stats change.
      await waitUntil("the abort counted", () => slow.stats().requestsAborted > 0, slow.onChange);
      expect(slow.stats().requestsAborted).toBe(1);
      expect(slow.stats().running).toBe(0);
      expect(slow.stats().kvCacheUsage).toBe(0);
      const metrics = await (await fetch(`${slow.url}/metrics`)).text();
      expect(metrics).toMatch(/vllm:request_success_total\{[^}]*finished_reason="abort"[^}]*\} 1/);
    } finally {
      await slow.close();
    }
  });
});

describe("time scale", () => {
  it("compresses wall time without changing the simulated latencies", async () => {
    // The wall side (a simulated ms is 1/20 wall ms) is the timeline's, checked on a manual clock in
    // scheduler.test.ts; here, over HTTP, the simulated latencies the engine reports are the unscaled ones.
    const fast = await startSimEngine({ profile: "qwen2.5-7b", timeScale: 20 });
    try {
      const res = await fetch(`${fast.url}/v1/chat/completions`, {
        method: "POST",
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 100 }),
      });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      const text = await (await fetch(`${fast.url}/metrics`)).text();
      const e2eSeconds = Number(/vllm:e2e_request_latency_seconds_sum\{[^}]*\} (\S+)/.exec(text)![1]);
      // One prefill step plus 99 decode steps of ~11.85 ms each.
      expect(e2eSeconds).toBeGreaterThan(1.1);
      expect(e2eSeconds).toBeLessThan(1.3);
    } finally {
      await fast.close();
    }
  });
});
