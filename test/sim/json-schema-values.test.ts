// The schema-value generator shared by tool arguments and structured output, checked by a real validator (ajv)
// over random schemas, plus the Python-style JSON text vLLM and Qwen's template write.
import { Ajv } from "ajv";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SeededRandom } from "../../src/core/random.js";
import { pythonJson, valueForSchema } from "../../src/sim/json-schema-values.js";

const ajv = new Ajv({ strict: false, validateFormats: false });

type Schema = Record<string, unknown>;

const leaf: fc.Arbitrary<Schema> = fc.oneof(
  fc.record(
    { type: fc.constant("string"), minLength: fc.integer({ min: 0, max: 12 }) },
    { requiredKeys: ["type"] },
  ),
  fc.record({ type: fc.constant("string"), maxLength: fc.integer({ min: 3, max: 12 }) }),
  fc.constant({ type: "string", format: "date-time" }),
  fc.constant({ type: "boolean" }),
  fc.constant({ type: "null" }),
  fc
    .tuple(fc.integer({ min: -50, max: 50 }), fc.integer({ min: 0, max: 100 }))
    .map(([low, span]) => ({ type: "integer", minimum: low, maximum: low + span })),
  fc
    .tuple(fc.integer({ min: -50, max: 50 }), fc.integer({ min: 1, max: 100 }))
    .map(([low, span]) => ({ type: "number", exclusiveMinimum: low, exclusiveMaximum: low + span })),
  fc
    .integer({ min: 2, max: 9 })
    .map((step) => ({ type: "integer", multipleOf: step, minimum: 0, maximum: 100 })),
  fc
    .uniqueArray(fc.oneof(fc.string({ maxLength: 6 }), fc.integer()), { minLength: 1, maxLength: 4 })
    .map((values) => ({
      enum: values,
    })),
  fc.constant({ const: "fixed" }),
  fc.constant({ type: ["string", "null"] }),
);

const schema: fc.Arbitrary<Schema> = fc.letrec<{ node: Schema }>((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    leaf,
    fc.dictionary(fc.stringMatching(/^[a-z]{1,6}$/), tie("node"), { maxKeys: 4 }).chain((properties) =>
      fc.record({
        type: fc.constant("object"),
        properties: fc.constant(properties),
        required: fc.subarray(Object.keys(properties)),
        additionalProperties: fc.boolean(),
      }),
    ),
    fc
      .tuple(tie("node"), fc.integer({ min: 0, max: 3 }), fc.integer({ min: 0, max: 3 }))
      .map(([items, min, extra]) => ({ type: "array", items, minItems: min, maxItems: min + extra })),
    fc.tuple(tie("node"), tie("node")).map(([a, b]) => ({ anyOf: [a, b] })),
  ),
})).node;

/** A root schema whose definitions (only a root may hold them) are used through $ref. */
const rootSchema: fc.Arbitrary<Schema> = fc.oneof(
  schema,
  fc.tuple(schema, schema).map(([inner, other]) => ({
    $defs: { inner },
    type: "object",
    properties: { r: { $ref: "#/$defs/inner" }, o: other },
    required: ["r"],
  })),
);

describe("valueForSchema", () => {
  it("produces values that a JSON Schema validator accepts, for random schemas", () => {
    fc.assert(
      fc.property(rootSchema, fc.integer(), (s, seed) => {
        const value = valueForSchema(s, new SeededRandom(seed));
        const validate = ajv.compile(s);
        const ok = validate(value);
        expect(validate.errors ?? [], JSON.stringify({ s, value })).toEqual([]);
        expect(ok).toBe(true);
        // The text form parses back to the same value.
        expect(JSON.parse(pythonJson(value))).toEqual(value);
      }),
      { numRuns: 200 },
    );
  });

  it("follows $ref into definitions, merges allOf and keeps required fields", () => {
    const s = {
      definitions: { point: { type: "object", properties: { x: { type: "integer" } }, required: ["x"] } },
      allOf: [
        { type: "object", properties: { a: { $ref: "#/definitions/point" } }, required: ["a"] },
        { properties: { b: { type: "string", enum: ["p", "q"] } }, required: ["b"] },
      ],
    };
    for (let seed = 0; seed < 20; seed++) {
      const value = valueForSchema(s, new SeededRandom(seed)) as { a: { x: number }; b: string };
      expect(Number.isInteger(value.a.x)).toBe(true);
      expect(["p", "q"]).toContain(value.b);
      expect(ajv.validate(s, value)).toBe(true);
    }
  });

  it("depends only on the seed", () => {
    const s = {
      type: "object",
      properties: { q: { type: "string" }, n: { type: "number" } },
      required: ["q", "n"],
    };
    expect(valueForSchema(s, new SeededRandom(3))).toEqual(valueForSchema(s, new SeededRandom(3)));
  });
});

describe("pythonJson", () => {
  it("writes JSON with Python's separators, as json.dumps and HF's tojson do", () => {
    expect(pythonJson({ a: [1, "x", { b: null }], c: true, é: "ü" })).toBe(
      '{"a": [1, "x", {"b": null}], "c": true, "é": "ü"}',
    );
  });
});
