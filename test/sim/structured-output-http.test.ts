// Structured output over real HTTP: response_format json_object and json_schema give JSON a validator accepts,
// counted in usage and streamed like any text.
import { Ajv } from "ajv";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";

let engine: SimEngineHandle;
let client: OpenAI;
const ajv = new Ajv({ strict: false, validateFormats: false });

beforeAll(async () => {
  engine = await startSimEngine({ profile: "instant", seed: 2 });
  client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: "unused", maxRetries: 0 });
});
afterAll(async () => {
  await engine.close();
});

const SCHEMAS: Record<string, Record<string, unknown>> = {
  person: {
    type: "object",
    properties: {
      name: { type: "string", minLength: 1 },
      age: { type: "integer", minimum: 0, maximum: 120 },
      email: { type: "string", format: "email" },
      member: { type: "boolean" },
    },
    required: ["name", "age", "member"],
    additionalProperties: false,
  },
  order: {
    type: "object",
    properties: {
      status: { type: "string", enum: ["pending", "shipped", "delivered"] },
      items: {
        type: "array",
        minItems: 1,
        maxItems: 4,
        items: {
          type: "object",
          properties: {
            sku: { type: "string" },
            qty: { type: "integer", minimum: 1 },
            price: { type: "number" },
          },
          required: ["sku", "qty", "price"],
        },
      },
      address: {
        type: "object",
        properties: { city: { type: "string" }, zip: { type: ["string", "null"] } },
        required: ["city", "zip"],
      },
    },
    required: ["status", "items", "address"],
  },
  tree: {
    $defs: {
      node: {
        type: "object",
        properties: {
          label: { type: "string" },
          children: { type: "array", items: { $ref: "#/$defs/node" } },
        },
        required: ["label"],
      },
    },
    $ref: "#/$defs/node",
  },
  list: { type: "array", items: { type: "number", minimum: 0, maximum: 1 }, minItems: 2, maxItems: 5 },
};

describe("response_format", () => {
  it.each(Object.keys(SCHEMAS))("json_schema %s gives JSON valid for the schema", async (name) => {
    const schema = SCHEMAS[name]!;
    const reply = await client.chat.completions.create({
      model: engine.model,
      messages: [{ role: "user", content: `Give me a ${name}` }],
      response_format: { type: "json_schema", json_schema: { name, schema, strict: true } },
    });
    const text = reply.choices[0]!.message.content!;
    const validate = ajv.compile(schema);
    const ok = validate(JSON.parse(text));
    expect(validate.errors ?? [], text).toEqual([]);
    expect(ok).toBe(true);
    expect(reply.choices[0]!.finish_reason).toBe("stop");
    // Every character came from generated tokens: 4 per token, plus end-of-turn.
    expect(reply.usage!.completion_tokens).toBe(Math.ceil(text.length / 4) + 1);
  });

  it("json_object gives a JSON object, the same streamed as whole", async () => {
    const request = {
      model: engine.model,
      messages: [{ role: "user" as const, content: "Any JSON object" }],
      response_format: { type: "json_object" as const },
    };
    const whole = await client.chat.completions.create(request);
    const parsed = JSON.parse(whole.choices[0]!.message.content!) as unknown;
    expect(typeof parsed === "object" && parsed !== null && !Array.isArray(parsed)).toBe(true);
    const stream = await client.chat.completions.create({ ...request, stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    expect(text).toBe(whole.choices[0]!.message.content);
  });

  it("is cut by max_tokens like any reply (finish length)", async () => {
    const request = {
      model: engine.model,
      messages: [{ role: "user" as const, content: "Big order" }],
      response_format: {
        type: "json_schema" as const,
        json_schema: { name: "order", schema: SCHEMAS["order"]! },
      },
    };
    const full = (await client.chat.completions.create(request)).choices[0]!.message.content!;
    const reply = await client.chat.completions.create({ ...request, max_tokens: 3 });
    expect(reply.choices[0]!.finish_reason).toBe("length");
    // The first three tokens of the same JSON text.
    expect(reply.choices[0]!.message.content).toBe(full.slice(0, 12));
    expect(full.startsWith('{"')).toBe(true);
  });

  it("rejects an unknown type or a json_schema without a schema", async () => {
    for (const format of [{ type: "yaml" }, { type: "json_schema", json_schema: { name: "x" } }]) {
      const res = await fetch(`${engine.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "x" }], response_format: format }),
      });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { param: string } }).error.param).toBe("response_format");
    }
  });
});
