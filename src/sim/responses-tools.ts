// Responses API `tools` as vLLM reads them: which types it accepts, which it offers the model, how it flattens
// namespaces and names their calls again.
//
// vLLM validates `tools` against the openai SDK's `Tool` union (vllm/entrypoints/openai/responses/protocol.py):
// an unknown `type` is a 400 there. For a non-harmony model (vLLM >= 0.25.1, PR #47024) it then offers the model
// function tools and the function tools of each namespace, as `<namespace>__<name>`
// (vllm/tool_parsers/utils.py), and hands their calls back as `{name, namespace}`; every other (hosted) type is
// accepted and never offered: only gpt-oss with a `--tool-server` runs web_search_preview or code_interpreter.
// vLLM's harmony path (gpt-oss models) refuses every type but function and the built-in ones with
// `tool type <type> not supported` (vllm/entrypoints/openai/parser/harmony_utils.py, get_developer_message).
import { badRequest } from "../surface/errors.js";
import type { ToolFunction } from "./tool-calls.js";

/** Whose tool handling the engine follows: vLLM's for most models, or its harmony path's (gpt-oss). */
export type ToolTypeSupport = "vllm" | "gpt-oss";
export const TOOL_TYPE_SUPPORTS: readonly ToolTypeSupport[] = ["vllm", "gpt-oss"];

export function isToolTypeSupport(value: string): value is ToolTypeSupport {
  return (TOOL_TYPE_SUPPORTS as readonly string[]).includes(value);
}

/** The `type`s of the openai SDK's Responses `Tool` union (openai 6.49 / 7.59, the spec vLLM validates with). */
export const RESPONSES_TOOL_TYPES: ReadonlySet<string> = new Set([
  "function",
  "file_search",
  "computer",
  "computer_use_preview",
  "web_search",
  "web_search_2025_08_26",
  "mcp",
  "code_interpreter",
  "programmatic_tool_calling",
  "image_generation",
  "local_shell",
  "shell",
  "custom",
  "namespace",
  "tool_search",
  "web_search_preview",
  "web_search_preview_2025_03_11",
  "apply_patch",
]);

/** What vLLM's harmony path accepts besides function tools: the built-in tools a tool server may run. */
const HARMONY_BUILTIN_TYPES: ReadonlySet<string> = new Set([
  "web_search_preview",
  "code_interpreter",
  "container",
]);

/** The name the model sees for a namespace's function (vLLM's flat_namespace_tool_name). */
export function flatToolName(namespace: string, name: string): string {
  return `${namespace}__${name}`;
}

/** A namespaced function as the client named it. */
export interface NamespacedName {
  namespace: string;
  name: string;
}

export interface ResponsesTools {
  /** The functions the model is offered, in the chat shape the template renders (`{type, function}`). */
  chatTools: unknown[];
  /** The same functions, under the names the model calls them by (namespaced ones flattened). */
  functions: ToolFunction[];
  /** Flattened name -> the client's namespace and name, for the calls handed back. */
  namespaced: ReadonlyMap<string, NamespacedName>;
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const EXPECTED_TAGS = [...RESPONSES_TOOL_TYPES].map((type) => `'${type}'`).join(", ");

/** A function tool (`{type: "function", name, parameters}`), as pydantic validates it. */
function functionTool(tool: Json, where: string): Json {
  if (typeof tool["name"] !== "string") throw badRequest(`${where}.name: Field required`, "tools");
  return tool;
}

function offer(result: ResponsesTools, tool: Json, name: string): void {
  result.functions.push({ name, parameters: tool["parameters"] ?? { type: "object", properties: {} } });
  // vLLM renders Responses tools wrapped as chat-completions tools, a namespace's under their flat names.
  result.chatTools.push({ type: "function", function: name === tool["name"] ? tool : { ...tool, name } });
}

/** Reads `tools` as vLLM does; refuses what it refuses, with a 400 and a similar message. */
export function parseResponsesTools(value: unknown, support: ToolTypeSupport = "vllm"): ResponsesTools {
  const namespaced = new Map<string, NamespacedName>();
  const result: ResponsesTools = { chatTools: [], functions: [], namespaced };
  if (value === undefined || value === null) return result;
  if (!Array.isArray(value)) throw badRequest("tools: Input should be a valid list", "tools");
  value.forEach((tool: unknown, index) => {
    const where = `tools[${index}]`;
    if (!isObject(tool)) throw badRequest(`${where}: Input should be a valid object`, "tools");
    const type = tool["type"];
    if (typeof type !== "string") {
      throw badRequest(`${where}: Unable to extract tag using discriminator 'type'`, "tools");
    }
    if (!RESPONSES_TOOL_TYPES.has(type)) {
      throw badRequest(
        `${where}: Input tag '${type}' found using 'type' does not match any of the expected tags: ${EXPECTED_TAGS}`,
        "tools",
      );
    }
    if (type === "function") {
      const fn = functionTool(tool, where);
      offer(result, fn, fn["name"] as string);
      return;
    }
    if (type === "namespace") {
      if (typeof tool["name"] !== "string") throw badRequest(`${where}.name: Field required`, "tools");
      if (!Array.isArray(tool["tools"])) throw badRequest(`${where}.tools: Field required`, "tools");
    }
    if (support === "gpt-oss") {
      if (HARMONY_BUILTIN_TYPES.has(type)) return;
      throw badRequest(`tool type ${type} not supported`);
    }
    if (type !== "namespace") return; // hosted or client-run: accepted, never offered to the model
    const namespace = tool["name"] as string;
    (tool["tools"] as unknown[]).forEach((inner: unknown, innerIndex) => {
      const innerWhere = `${where}.tools[${innerIndex}]`;
      if (!isObject(inner) || (inner["type"] !== "function" && inner["type"] !== "custom")) {
        throw badRequest(`${innerWhere}: expected a function or custom tool`, "tools");
      }
      const fn = functionTool(inner, innerWhere);
      if (fn["type"] !== "function") return; // vLLM offers only a namespace's functions
      const flat = flatToolName(namespace, fn["name"] as string);
      namespaced.set(flat, { namespace, name: fn["name"] as string });
      offer(result, fn, flat);
    });
  });
  return result;
}

/** The types of `tool_choice` objects that name no function: vLLM's non-harmony path then decides as with auto. */
const NON_FUNCTION_CHOICES: ReadonlySet<string> = new Set([
  "allowed_tools",
  "file_search",
  "web_search_preview",
  "web_search_preview_2025_03_11",
  "computer",
  "computer_use",
  "computer_use_preview",
  "image_generation",
  "code_interpreter",
  "mcp",
  "custom",
  "apply_patch",
  "shell",
]);

/**
 * `tool_choice` as the tool-call planner reads it: a hosted tool's choice means auto (vLLM builds no guided
 * decoding for it); a function named by its bare name inside a namespace means its flat name (vLLM also maps
 * `name.rsplit("__")[1]`).
 */
export function normaliseToolChoice(value: unknown, tools: ResponsesTools): unknown {
  if (!isObject(value)) return value;
  const type = value["type"];
  if (typeof type === "string" && NON_FUNCTION_CHOICES.has(type)) return "auto";
  const name = value["name"];
  if (type !== "function" || typeof name !== "string") return value;
  if (tools.functions.some((fn) => fn.name === name)) return value;
  const namespace = value["namespace"];
  for (const [flat, owner] of tools.namespaced) {
    if (owner.name === name && (typeof namespace !== "string" || namespace === owner.namespace)) {
      return { type: "function", name: flat };
    }
  }
  return value;
}
