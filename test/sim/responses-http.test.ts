// The Responses API over real HTTP through the openai SDK: response objects, the event stream in order,
// previous_response_id chains that reuse the prefix cache, function calls, retrieval, cancel and errors.
import { Ajv } from "ajv";
import OpenAI from "openai";
import type { FunctionTool, ResponseStreamEvent } from "openai/resources/responses/responses";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";

let engine: SimEngineHandle;
let client: OpenAI;

beforeAll(async () => {
  engine = await startSimEngine({ profile: "instant", seed: 4 });
  client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: "unused", maxRetries: 0 });
});
afterAll(async () => {
  await engine.close();
});

const INSTRUCTIONS = "You are a patient assistant who answers in short sentences. ".repeat(6);

const LOOKUP: FunctionTool = {
  type: "function",
  name: "lookup_order",
  description: "Find an order",
  strict: true,
  parameters: {
    type: "object",
    properties: {
      order_id: { type: "string", minLength: 3 },
      include: { type: "array", items: { type: "string", enum: ["items", "address"] }, maxItems: 2 },
    },
    required: ["order_id", "include"],
    additionalProperties: false,
  },
};

describe("POST /v1/responses", () => {
  it("answers a string input with a response object the SDK reads, usage included", async () => {
    const response = await client.responses.create({
      model: engine.model,
      instructions: INSTRUCTIONS,
      input: "What is a prefix cache?",
      max_output_tokens: 8,
      ...({ ignore_eos: true } as object),
    });
    expect(response.id).toMatch(/^resp_[0-9a-f]{32}$/);
    expect(response.object).toBe("response");
    // With ignore_eos the reply is exactly max_output_tokens, so it stops on the limit: vLLM says incomplete.
    expect(response.status).toBe("incomplete");
    expect(response.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(response.output).toHaveLength(1);
    const item = response.output[0]!;
    expect(item.type).toBe("message");
    expect(item.type === "message" && item.id).toMatch(/^msg_/);
    expect(response.output_text).toHaveLength(8 * 4);
    expect(response.usage).toMatchObject({
      output_tokens: 8,
      total_tokens: response.usage!.input_tokens + 8,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens_details: { reasoning_tokens: 0 },
    });
  });

  it("ends a free answer with status completed", async () => {
    const response = await client.responses.create({
      model: engine.model,
      input: [{ role: "user", content: "Hi" }],
    });
    expect(response.status).toBe("completed");
    // The end-of-turn token is generated (and counted) but has no text.
    expect(response.output_text).toHaveLength((response.usage!.output_tokens - 1) * 4);
  });

  it("streams created, in_progress, the item and part events, text deltas, done events, completed, numbered", async () => {
    const stream = await client.responses.create({
      model: engine.model,
      input: [{ role: "user", content: [{ type: "input_text", text: "Stream me a few words" }] }],
      max_output_tokens: 4,
      ...({ ignore_eos: true } as object),
      stream: true,
    });
    const events: ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    expect(events.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const deltas = events.flatMap((e) => (e.type === "response.output_text.delta" ? [e.delta] : []));
    const done = events.find((e) => e.type === "response.output_text.done");
    expect(done?.type === "response.output_text.done" && done.text).toBe(deltas.join(""));
    const completed = events.at(-1)!;
    if (completed.type !== "response.completed") throw new Error("no completed event");
    expect(completed.response.output_text ?? completed.response.output).toBeDefined();
    const item = completed.response.output[0]!;
    expect(item.type === "message" && item.content[0]).toMatchObject({
      type: "output_text",
      text: deltas.join(""),
    });
    expect(completed.response.usage!.output_tokens).toBe(4);
  });

  it("chains turns by previous_response_id: the stored history is the prompt, so turn 2 hits the cache", async () => {
    const first = await client.responses.create({
      model: engine.model,
      instructions: INSTRUCTIONS,
      input: "Turn one: tell me about blocks.",
      max_output_tokens: 20,
    });
    const second = await client.responses.create({
      model: engine.model,
      instructions: INSTRUCTIONS,
      previous_response_id: first.id,
      input: "Turn two: and eviction?",
      max_output_tokens: 20,
    });
    expect(second.previous_response_id).toBe(first.id);
    const reusable = first.usage!.input_tokens + first.usage!.output_tokens - 1;
    expect(second.usage!.input_tokens).toBeGreaterThan(reusable);
    expect(second.usage!.input_tokens_details.cached_tokens).toBe(Math.floor(reusable / 16) * 16);
    const third = await client.responses.create({
      model: engine.model,
      instructions: INSTRUCTIONS,
      previous_response_id: second.id,
      input: "Turn three.",
      max_output_tokens: 5,
    });
    const reusable2 = second.usage!.input_tokens + second.usage!.output_tokens - 1;
    expect(third.usage!.input_tokens_details.cached_tokens).toBe(Math.floor(reusable2 / 16) * 16);
  });

  it("does not keep a response with store false", async () => {
    const response = await client.responses.create({ model: engine.model, input: "forget me", store: false });
    await expect(client.responses.retrieve(response.id)).rejects.toMatchObject({ status: 404 });
    await expect(
      client.responses.create({ model: engine.model, input: "next", previous_response_id: response.id }),
    ).rejects.toMatchObject({ status: 404 });
  });

  it("answers an unknown previous_response_id with vLLM's 404", async () => {
    const res = await fetch(`${engine.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input: "x", previous_response_id: "resp_missing" }),
    });
    expect(res.status).toBe(404);
    expect(await res.json()).toMatchObject({
      error: { message: "Response with id 'resp_missing' not found.", param: "response_id", code: 404 },
    });
  });

  it("rejects malformed input with 400", async () => {
    for (const body of [
      {},
      { input: 5 },
      { input: [{ type: "image_generation_call" }] },
      // A type outside the openai SDK's tool union (web_search is in it: vLLM accepts that one).
      { input: "x", tools: [{ type: "browser" }] },
    ]) {
      const res = await fetch(`${engine.url}/v1/responses`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      expect(res.status, JSON.stringify(body)).toBe(400);
    }
  });
});

describe("function calls in the Responses API", () => {
  const ajv = new Ajv({ strict: false });

  it("returns function_call items with schema-valid arguments, and a text answer after the output", async () => {
    const response = await client.responses.create({
      model: engine.model,
      instructions: INSTRUCTIONS,
      input: "Where is order 123?",
      tools: [LOOKUP],
    });
    expect(response.status).toBe("completed");
    const calls = response.output.filter((item) => item.type === "function_call");
    expect(calls).toHaveLength(1);
    const call = calls[0]!;
    if (call.type !== "function_call") throw new Error("not a call");
    expect(call.id).toMatch(/^fc_/);
    expect(call.name).toBe("lookup_order");
    expect(ajv.validate(LOOKUP.parameters!, JSON.parse(call.arguments))).toBe(true);

    const followUp = await client.responses.create({
      model: engine.model,
      instructions: INSTRUCTIONS,
      previous_response_id: response.id,
      input: [{ type: "function_call_output", call_id: call.call_id, output: '{"status": "shipped"}' }],
      tools: [LOOKUP],
    });
    expect(followUp.output.map((item) => item.type)).toEqual(["message"]);
    expect(followUp.output_text.length).toBeGreaterThan(0);
    // The call re-renders to the generated tokens, so the whole first turn is reused.
    const reusable = response.usage!.input_tokens + response.usage!.output_tokens - 1;
    expect(followUp.usage!.input_tokens_details.cached_tokens).toBe(Math.floor(reusable / 16) * 16);
  });

  it("streams a call as output_item.added, argument deltas, arguments done, item done; the SDK helper agrees", async () => {
    const request = { model: engine.model, input: "Look up order 77", tools: [LOOKUP] };
    const whole = await client.responses.create(request);
    const stream = await client.responses.create({ ...request, stream: true });
    const events: ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const types = events.map((e) => e.type);
    expect(types.slice(0, 3)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
    ]);
    expect(types.slice(-3)).toEqual([
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(new Set(types.slice(3, -3))).toEqual(new Set(["response.function_call_arguments.delta"]));
    const fragments = events.flatMap((e) =>
      e.type === "response.function_call_arguments.delta" ? [e.delta] : [],
    );
    const done = events.find((e) => e.type === "response.function_call_arguments.done");
    const wholeCall = whole.output[0]!;
    if (wholeCall.type !== "function_call" || done?.type !== "response.function_call_arguments.done") {
      throw new Error("expected calls");
    }
    expect(fragments.join("")).toBe(done.arguments);
    expect(done.arguments).toBe(wholeCall.arguments);

    const final = await client.responses.stream({ ...request }).finalResponse();
    const finalCall = final.output[0]!;
    expect(finalCall.type === "function_call" && [finalCall.name, finalCall.arguments]).toEqual([
      wholeCall.name,
      wholeCall.arguments,
    ]);
  });

  it("follows text.format json_schema", async () => {
    const schema = {
      type: "object",
      properties: { ok: { type: "boolean" }, n: { type: "integer" } },
      required: ["ok", "n"],
    };
    const response = await client.responses.create({
      model: engine.model,
      input: "JSON please",
      text: { format: { type: "json_schema", name: "result", schema, strict: true } },
    });
    expect(ajv.validate(schema, JSON.parse(response.output_text))).toBe(true);
  });
});

describe("GET, cancel and DELETE on /v1/responses/{id}", () => {
  it("retrieves a stored response as it was returned", async () => {
    const created = await client.responses.create({
      model: engine.model,
      input: "keep me",
      max_output_tokens: 3,
    });
    const fetched = await client.responses.retrieve(created.id);
    expect(fetched.id).toBe(created.id);
    expect(fetched.output).toEqual(created.output);
    expect(fetched.usage).toEqual(created.usage);
    await expect(client.responses.retrieve("resp_unknown")).rejects.toMatchObject({ status: 404 });
  });

  it("cancels nothing (vLLM cancels only background responses) and has no DELETE", async () => {
    const created = await client.responses.create({
      model: engine.model,
      input: "done already",
      max_output_tokens: 2,
    });
    await expect(client.responses.cancel(created.id)).rejects.toMatchObject({ status: 400 });
    await expect(client.responses.cancel("resp_unknown")).rejects.toMatchObject({ status: 404 });
    const deleted = await fetch(`${engine.url}/v1/responses/${created.id}`, { method: "DELETE" });
    expect(deleted.status).toBe(405);
    expect(await deleted.json()).toEqual({ detail: "Method Not Allowed" });
    expect((await client.responses.retrieve(created.id)).id).toBe(created.id);
  });
});

describe("faults on the Responses API", () => {
  it("cut_stream drops a stream after that many events and keeps nothing in the store", async () => {
    engine.setFault({ kind: "cut_stream", afterChunks: 3 });
    try {
      const res = await fetch(`${engine.url}/v1/responses`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ input: "cut me", max_output_tokens: 10, stream: true }),
      });
      expect(res.status).toBe(200);
      let text = "";
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      await expect(
        (async () => {
          for (;;) {
            const { done, value } = await reader.read();
            if (done) return;
            text += decoder.decode(value);
          }
        })(),
      ).rejects.toThrow();
      const types = [...text.matchAll(/^event: (\S+)$/gm)].map((m) => m[1]);
      expect(types).toEqual(["response.created", "response.in_progress", "response.output_item.added"]);
      const id = /"id":"(resp_[0-9a-f]+)"/.exec(text)![1]!;
      engine.setFault({ kind: "none" });
      await expect(client.responses.retrieve(id)).rejects.toMatchObject({ status: 404 });
    } finally {
      engine.setFault({ kind: "none" });
    }
  });
});
