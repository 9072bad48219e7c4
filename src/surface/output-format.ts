// Structured output requests (`response_format`, the Responses API's `text.format`): what the reply must be.
import { badRequest } from "./errors.js";

/** What the reply must be: free text, any JSON object, or JSON valid for a schema. */
export type OutputFormat =
  { kind: "text" } | { kind: "json_object" } | { kind: "json_schema"; schema: unknown };

export const TEXT_FORMAT: OutputFormat = { kind: "text" };

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * Reads chat completions' `response_format` (`{type, json_schema: {name, schema, strict}}`) or, with `flat`, the
 * Responses API's `text.format` (`{type, name, schema, strict}`).
 */
export function parseOutputFormat(value: unknown, param: string, flat = false): OutputFormat {
  if (value === undefined || value === null) return TEXT_FORMAT;
  if (!isObject(value) || typeof value["type"] !== "string") {
    throw badRequest(`${param}: Input should be an object with a 'type'`, param);
  }
  switch (value["type"]) {
    case "text":
      return TEXT_FORMAT;
    case "json_object":
      return { kind: "json_object" };
    case "json_schema": {
      const holder = flat ? value : value["json_schema"];
      if (!isObject(holder)) throw badRequest(`${param}.json_schema: Field required`, param);
      const schema = holder["schema"] ?? holder["schema_"];
      if (typeof holder["name"] !== "string" && !flat) {
        throw badRequest(`${param}.json_schema.name: Field required`, param);
      }
      if (!isObject(schema) && schema !== true) {
        throw badRequest(`${param}: a json_schema format needs a 'schema' object`, param);
      }
      return { kind: "json_schema", schema };
    }
    default:
      throw badRequest(
        `${param}.type: Input should be 'text', 'json_object' or 'json_schema', got '${String(value["type"])}'`,
        param,
      );
  }
}
