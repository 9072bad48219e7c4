// Values that satisfy a JSON Schema, drawn from a seeded PRNG: tool-call arguments and structured output share it.
//
// Guided decoding (vLLM's xgrammar/outlines back ends) makes a model emit text that the schema accepts; the
// simulator has no model, so it builds such a value directly. Covered: type (one or a list), const, enum,
// properties/required/additionalProperties, items/prefixItems/minItems/maxItems, minimum/maximum (exclusive too),
// multipleOf for integers, minLength/maxLength, format (date-time, date, time, email, uri, uuid), anyOf/oneOf (one
// branch), allOf (merged), $ref into #/$defs or #/definitions, nullable. Not covered: `pattern` (its strings are
// left as plain words, so a schema with a pattern may be violated), `not`, if/then/else, dependent schemas.
import type { Random } from "../core/random.js";

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
type Schema = Record<string, unknown>;

const WORDS = [
  "alpha",
  "beta",
  "gamma",
  "delta",
  "paris",
  "tokyo",
  "report",
  "main",
  "config",
  "index",
  "value",
  "blue",
  "green",
  "north",
  "south",
  "ready",
];

/** Deepest nesting the generator follows (recursive $refs stop here with the smallest value allowed). */
const MAX_DEPTH = 8;
/** Arrays without maxItems get at most this many items; objects without properties at most this many keys. */
const DEFAULT_MAX_ITEMS = 3;

function isSchema(value: unknown): value is Schema {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function pick<T>(random: Random, items: readonly T[]): T {
  return items[Math.floor(random.next() * items.length)] as T;
}

function intBetween(random: Random, low: number, high: number): number {
  return low + Math.floor(random.next() * (high - low + 1));
}

function numberOr(value: unknown, fallback: number): number {
  return typeof value === "number" && Number.isFinite(value) ? value : fallback;
}

export class SchemaValueGenerator {
  constructor(
    private readonly random: Random,
    /** The document `$ref`s resolve against (the root schema). */
    private readonly root: Schema,
  ) {}

  /** A value valid for `schema` (the root when omitted). */
  value(schema: unknown = this.root, depth = 0): JsonValue {
    if (schema === true || !isSchema(schema)) return this.word();
    const resolved = this.resolve(schema, depth);
    if ("const" in resolved) return resolved["const"] as JsonValue;
    const choices = resolved["enum"];
    if (Array.isArray(choices) && choices.length > 0) return pick(this.random, choices) as JsonValue;
    const branches = resolved["anyOf"] ?? resolved["oneOf"];
    if (Array.isArray(branches) && branches.length > 0) {
      // The first branch that is not just `null`, so a nullable field still gets a real value.
      const real = branches.filter((branch) => !(isSchema(branch) && branch["type"] === "null"));
      return this.value(real.length > 0 ? real[0] : branches[0], depth + 1);
    }
    const type = this.typeOf(resolved);
    switch (type) {
      case "object":
        return this.object(resolved, depth);
      case "array":
        return this.array(resolved, depth);
      case "integer":
        return this.integer(resolved);
      case "number":
        return this.number(resolved);
      case "boolean":
        return this.random.next() < 0.5;
      case "null":
        return null;
      default:
        return this.string(resolved);
    }
  }

  /** Follows $ref and merges allOf, so the rest of the generator sees one flat schema. */
  private resolve(schema: Schema, depth: number): Schema {
    let current = schema;
    for (let hops = 0; typeof current["$ref"] === "string" && hops < MAX_DEPTH; hops++) {
      const target = this.lookup(current["$ref"]);
      const { $ref: _ref, ...rest } = current;
      current = { ...target, ...rest };
    }
    const all = current["allOf"];
    if (Array.isArray(all) && depth < MAX_DEPTH) {
      let merged: Schema = { ...current };
      delete merged["allOf"];
      for (const part of all) {
        if (!isSchema(part)) continue;
        const flat = this.resolve(part, depth + 1);
        merged = {
          ...merged,
          ...flat,
          properties: { ...(merged["properties"] as Schema), ...(flat["properties"] as Schema) },
          required: [
            ...((merged["required"] as string[] | undefined) ?? []),
            ...((flat["required"] as string[] | undefined) ?? []),
          ],
        };
      }
      current = merged;
    }
    return current;
  }

  private lookup(ref: string): Schema {
    if (!ref.startsWith("#")) return {};
    let node: unknown = this.root;
    for (const raw of ref
      .slice(1)
      .split("/")
      .filter((part) => part.length > 0)) {
      const key = raw.replaceAll("~1", "/").replaceAll("~0", "~");
      node = isSchema(node) ? node[key] : undefined;
    }
    return isSchema(node) ? node : {};
  }

  private typeOf(schema: Schema): string {
    const type = schema["type"];
    if (typeof type === "string") return type;
    if (Array.isArray(type) && type.length > 0) {
      const real = type.filter((t) => t !== "null");
      return String(real.length > 0 ? real[0] : type[0]);
    }
    if (isSchema(schema["properties"]) || "required" in schema) return "object";
    if ("items" in schema || "prefixItems" in schema) return "array";
    if ("minimum" in schema || "maximum" in schema) return "number";
    return "string";
  }

  private object(schema: Schema, depth: number): JsonValue {
    const out: Record<string, JsonValue> = {};
    const properties = isSchema(schema["properties"]) ? schema["properties"] : {};
    const required = new Set(Array.isArray(schema["required"]) ? (schema["required"] as string[]) : []);
    const names = Object.keys(properties);
    for (const name of names) {
      // Required fields always; optional ones most of the time, unless the nesting is already deep.
      const include = required.has(name) || (depth < 3 && this.random.next() < 0.7);
      if (include) out[name] = this.value(properties[name], depth + 1);
    }
    for (const name of required) {
      if (!(name in out)) out[name] = this.value(schema["additionalProperties"] ?? {}, depth + 1);
    }
    if (names.length === 0 && required.size === 0 && schema["additionalProperties"] !== false && depth < 2) {
      // A free-form object (json_object mode, or `{"type": "object"}`): a few plain keys.
      const count = intBetween(this.random, 1, DEFAULT_MAX_ITEMS);
      for (let i = 0; i < count; i++) {
        const extra = schema["additionalProperties"];
        out[this.word()] = isSchema(extra) ? this.value(extra, depth + 1) : this.scalar();
      }
    }
    return out;
  }

  private array(schema: Schema, depth: number): JsonValue {
    const prefix = Array.isArray(schema["prefixItems"]) ? (schema["prefixItems"] as unknown[]) : [];
    const min = Math.max(numberOr(schema["minItems"], 0), prefix.length);
    const max = Math.max(min, numberOr(schema["maxItems"], Math.max(min, DEFAULT_MAX_ITEMS)));
    // At least one item when the schema allows it: an empty array says little.
    const count = depth >= MAX_DEPTH ? min : intBetween(this.random, Math.min(Math.max(min, 1), max), max);
    const items = schema["items"];
    const out: JsonValue[] = [];
    for (let i = 0; i < count; i++) {
      out.push(this.value(i < prefix.length ? prefix[i] : (items ?? {}), depth + 1));
    }
    if (schema["uniqueItems"] === true) {
      const seen = new Set<string>();
      return out.filter((item) => {
        const key = JSON.stringify(item);
        if (seen.has(key) && out.length - 1 >= min) return false;
        seen.add(key);
        return true;
      });
    }
    return out;
  }

  private bounds(schema: Schema, integral: boolean): [number, number] {
    const step = integral ? 1 : 0.01;
    let low = numberOr(schema["minimum"], Number.NEGATIVE_INFINITY);
    let high = numberOr(schema["maximum"], Number.POSITIVE_INFINITY);
    const exclusiveLow = schema["exclusiveMinimum"];
    const exclusiveHigh = schema["exclusiveMaximum"];
    if (typeof exclusiveLow === "number") low = Math.max(low, exclusiveLow + step);
    else if (exclusiveLow === true) low += step;
    if (typeof exclusiveHigh === "number") high = Math.min(high, exclusiveHigh - step);
    else if (exclusiveHigh === true) high -= step;
    if (!Number.isFinite(low) && !Number.isFinite(high)) return [0, 100];
    if (!Number.isFinite(low)) low = high - 100;
    if (!Number.isFinite(high)) high = low + 100;
    return [low, high];
  }

  private integer(schema: Schema): number {
    const [low, high] = this.bounds(schema, true);
    const lowInt = Math.ceil(low);
    const highInt = Math.max(lowInt, Math.floor(high));
    const multiple = numberOr(schema["multipleOf"], 1);
    if (Number.isInteger(multiple) && multiple > 1) {
      const first = Math.ceil(lowInt / multiple);
      const last = Math.max(first, Math.floor(highInt / multiple));
      return intBetween(this.random, first, last) * multiple;
    }
    return intBetween(this.random, lowInt, highInt);
  }

  private number(schema: Schema): number {
    if (typeof schema["multipleOf"] === "number") return this.integer(schema);
    const [low, high] = this.bounds(schema, false);
    // Two decimals: short to print, and still strictly inside exclusive bounds.
    const value = Math.round((low + this.random.next() * (high - low)) * 100) / 100;
    return Math.min(high, Math.max(low, value));
  }

  private string(schema: Schema): string {
    switch (schema["format"]) {
      case "date-time":
        return `2026-0${intBetween(this.random, 1, 9)}-1${intBetween(this.random, 0, 9)}T12:00:00Z`;
      case "date":
        return `2026-0${intBetween(this.random, 1, 9)}-1${intBetween(this.random, 0, 9)}`;
      case "time":
        return `1${intBetween(this.random, 0, 9)}:30:00`;
      case "email":
        return `${this.word()}@example.com`;
      case "uri":
      case "url":
        return `https://example.com/${this.word()}`;
      case "uuid":
        return "123e4567-e89b-42d3-a456-42661417400" + intBetween(this.random, 0, 9);
      default:
        break;
    }
    const minLength = numberOr(schema["minLength"], 0);
    const maxLength = numberOr(schema["maxLength"], Number.POSITIVE_INFINITY);
    let text = this.word();
    while (text.length < minLength) text += ` ${this.word()}`;
    if (text.length > maxLength) text = text.slice(0, Math.max(minLength, maxLength));
    return text;
  }

  private scalar(): JsonValue {
    const roll = this.random.next();
    if (roll < 0.5) return this.word();
    if (roll < 0.8) return intBetween(this.random, 0, 100);
    return roll < 0.9;
  }

  private word(): string {
    return pick(this.random, WORDS);
  }
}

/** A value for `schema`, resolving `$ref`s against the schema itself. */
export function valueForSchema(schema: unknown, random: Random): JsonValue {
  const root = isSchema(schema) ? schema : {};
  return new SchemaValueGenerator(random, root).value(schema);
}

/**
 * JSON as Python's json.dumps writes it (`", "` and `": "`, non-ASCII kept): what vLLM's parsers and Qwen's
 * chat template (HF's `tojson`) produce, so generated calls and re-rendered history are the same text.
 */
export function pythonJson(value: unknown): string {
  if (value === null || typeof value !== "object") return JSON.stringify(value ?? null);
  if (Array.isArray(value)) return `[${value.map((item) => pythonJson(item)).join(", ")}]`;
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
  return `{${entries.map(([key, v]) => `${JSON.stringify(key)}: ${pythonJson(v)}`).join(", ")}}`;
}
