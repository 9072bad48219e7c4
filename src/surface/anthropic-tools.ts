// Anthropic Messages API `tools` as vLLM's /v1/messages reads them (vllm/entrypoints/anthropic/protocol.py).
//
// vLLM's AnthropicTool is `{name, description?, input_schema, strict?, defer_loading?}`; `type` is ignored. So
// custom tools (Claude Code sends its tools without a `type`) pass, and a server tool such as
// `{"type": "web_search_20250305", "name": "web_search"}`, which has no input_schema, is a 400 validation error.
import { badRequest } from "./errors.js";
import type { ToolFunction } from "./tool-requests.js";

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The functions of a Messages request's `tools`; refuses what vLLM's pydantic model refuses. */
export function parseAnthropicTools(value: unknown): ToolFunction[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw badRequest("tools: Input should be a valid list", "tools");
  return value.map((tool: unknown, index) => {
    const where = `tools.${index}`;
    if (!isObject(tool)) throw badRequest(`${where}: Input should be a valid dictionary`, "tools");
    if (typeof tool["name"] !== "string") throw badRequest(`${where}.name: Field required`, "tools");
    const schema = tool["input_schema"];
    if (schema === undefined) throw badRequest(`${where}.input_schema: Field required`, "tools");
    if (!isObject(schema)) {
      throw badRequest(`${where}.input_schema: Input should be a valid dictionary`, "tools");
    }
    // vLLM defaults a schema without a type to an object schema.
    return { name: tool["name"], parameters: "type" in schema ? schema : { type: "object", ...schema } };
  });
}
