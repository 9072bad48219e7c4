// Drops the Anthropic server tools of a Messages API request (`web_search_20250305`, `web_fetch_*`, ...): vLLM's
// /v1/messages requires an `input_schema` on every tool (vllm/entrypoints/anthropic/protocol.py), which server
// tools do not have, so a stock engine answers 400; and no engine runs them. Custom tools (no `type`, as Claude
// Code sends them) are never touched. Nothing comes back to restore: the engine simply never calls a dropped tool.
import type { AdaptationSettings } from "./responses-tools.js";

/** The kinds of tool Anthropic runs on its side, by the prefix of their versioned `type`. */
const SERVER_TOOL_PREFIXES = ["web_search_", "web_fetch_", "code_execution_", "tool_search_tool_"];

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isServerTool(tool: unknown): tool is Json & { type: string } {
  if (!isObject(tool) || typeof tool["type"] !== "string" || "input_schema" in tool) return false;
  const type = tool["type"];
  return SERVER_TOOL_PREFIXES.some((prefix) => type.startsWith(prefix));
}

/** The body without its server tools; undefined when there were none (or the adaptation is off). */
export function adaptMessagesRequest(
  body: Json,
  settings: AdaptationSettings,
): { changes: string[]; body: Json } | undefined {
  const tools = body["tools"];
  if (!settings.dropHostedTools || !Array.isArray(tools) || !tools.some(isServerTool)) return undefined;
  const changes: string[] = [];
  const droppedNames = new Set<string>();
  const kept = tools.filter((tool: unknown) => {
    if (!isServerTool(tool)) return true;
    changes.push(`drop_tool:${tool.type}`);
    if (typeof tool["name"] === "string") droppedNames.add(tool["name"]);
    return false;
  });
  const out: Json = { ...body, tools: kept };
  const choice = body["tool_choice"];
  if (isObject(choice) && choice["type"] === "tool" && droppedNames.has(choice["name"] as string)) {
    // Forcing a dropped tool: the model decides among what is left (Anthropic's other options kept).
    const { name: _name, ...rest } = choice;
    out["tool_choice"] = { ...rest, type: "auto" };
    changes.push("tool_choice:auto");
  }
  return { changes, body: out };
}
