// Rewrites a Responses API request whose tools a stock engine may refuse: namespaces flattened, hosted tools dropped.
//
// Codex CLI sends a `namespace` tool (functions grouped under a name) and a `web_search` tool beside its
// functions. vLLM's harmony path (gpt-oss) refuses both ("tool type namespace not supported"), vLLM before 0.25
// refuses `namespace`, llama.cpp's server knows neither; no engine runs web_search without a tool server. So,
// unless the operator turns it off, the gateway offers a namespace's functions as plain functions named
// `<namespace>__<name>` (the name vLLM itself gives them, so an engine that flattens namespaces sees the same
// prompt), drops hosted tools, and maps the engine's calls back (restore.ts). A request with function tools only
// costs one loop over its tools' types.
import { GatewayError } from "../../core/errors.js";
import { CallRestorer, type NamespacedName } from "./restore.js";

export interface AdaptationSettings {
  /** Offer a namespace's functions as plain functions and map their calls back. */
  flattenNamespaces: boolean;
  /** Drop tools the provider runs (web search, file search, ...): no engine runs them without a tool server. */
  dropHostedTools: boolean;
  /** Fold a Messages request's mid-conversation system messages into a user turn (messages-system.ts). */
  foldSystemMessages: boolean;
  /** Drop Claude Code's billing-header block from a Messages request's `system` (messages-system.ts). */
  dropBillingHeader: boolean;
}

/** What the gateway changed, and how to give the client the answer it expects. */
export interface RequestAdaptation {
  /** e.g. `flatten_namespace:multi_agent_v1`, `drop_tool:web_search`, `tool_choice:auto`. */
  changes: string[];
  /** The body the engine gets. */
  body: Record<string, unknown>;
  /** Restores the engine's answers (JSON or events) to the client's names and tools. */
  restorer: CallRestorer;
}

/** Tool types a provider runs itself: an engine can only refuse them or never call them. */
export const HOSTED_TOOL_TYPES: ReadonlySet<string> = new Set([
  "web_search",
  "web_search_2025_08_26",
  "web_search_preview",
  "web_search_preview_2025_03_11",
  "file_search",
  "code_interpreter",
  "image_generation",
  "mcp",
  "tool_search",
]);

/** The separator vLLM puts between a namespace and its function's name (vllm/tool_parsers/utils.py). */
export const NAMESPACE_SEPARATOR = "__";

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Whether some tool is neither a plain function nor unknown to this module: the only per-request cost. */
function needsLook(tools: readonly unknown[]): boolean {
  for (const tool of tools) {
    if (isObject(tool) && tool["type"] !== "function") return true;
  }
  return false;
}

/** The tools, adapted; undefined when nothing had to change. Throws when two tools would share a flat name. */
export function adaptResponsesRequest(
  body: Json,
  settings: AdaptationSettings,
): RequestAdaptation | undefined {
  const tools = body["tools"];
  if (!Array.isArray(tools) || !needsLook(tools)) return undefined;
  if (!settings.flattenNamespaces && !settings.dropHostedTools) return undefined;
  const changes: string[] = [];
  const names = new Map<string, NamespacedName>();
  const dropped = new Set<string>();
  const offered = new Set<string>();
  for (const tool of tools) {
    if (isObject(tool) && tool["type"] === "function" && typeof tool["name"] === "string") {
      offered.add(tool["name"]);
    }
  }
  const adapted: unknown[] = [];
  for (const tool of tools) {
    const type = isObject(tool) ? tool["type"] : undefined;
    if (type === "namespace" && settings.flattenNamespaces && isNamespace(tool)) {
      flattenNamespace(tool, adapted, names, offered);
      changes.push(`flatten_namespace:${tool["name"]}`);
    } else if (typeof type === "string" && HOSTED_TOOL_TYPES.has(type) && settings.dropHostedTools) {
      dropped.add(type);
      changes.push(`drop_tool:${type}`);
    } else adapted.push(tool);
  }
  if (changes.length === 0) return undefined;
  const out: Json = { ...body, tools: adapted };
  const choice = adaptToolChoice(body["tool_choice"], names, dropped, offered);
  if (choice !== undefined) {
    out["tool_choice"] = choice.value;
    changes.push(`tool_choice:${choice.label}`);
  }
  if (names.size > 0) {
    const input = flattenHistory(body["input"]);
    if (input !== undefined) out["input"] = input;
  }
  return { changes, body: out, restorer: new CallRestorer(names, body["tools"], body["tool_choice"]) };
}

function isNamespace(tool: unknown): tool is Json & { name: string; tools: unknown[] } {
  return isObject(tool) && typeof tool["name"] === "string" && Array.isArray(tool["tools"]);
}

/**
 * Adds a namespace's functions as plain ones. Its other members (custom tools) are left out, as vLLM leaves
 * them out of a namespace. A flat name already taken would make the engine's calls ambiguous: a 400.
 */
function flattenNamespace(
  tool: Json & { name: string; tools: unknown[] },
  out: unknown[],
  names: Map<string, NamespacedName>,
  offered: Set<string>,
): void {
  for (const inner of tool.tools) {
    if (!isObject(inner) || inner["type"] !== "function" || typeof inner["name"] !== "string") continue;
    const flat = `${tool.name}${NAMESPACE_SEPARATOR}${inner["name"]}`;
    if (offered.has(flat) || names.has(flat)) {
      throw new GatewayError(
        "invalid_request",
        `tools: namespace '${tool.name}' flattens its function '${inner["name"]}' to '${flat}', a name another ` +
          "tool already has; rename one, or turn adaptation.flatten_namespaces off",
        { param: "tools" },
      );
    }
    names.set(flat, { namespace: tool.name, name: inner["name"] });
    offered.add(flat);
    out.push({ ...inner, name: flat });
  }
}

/** The tool_choice the engine gets, when it must change; undefined otherwise. */
function adaptToolChoice(
  choice: unknown,
  names: ReadonlyMap<string, NamespacedName>,
  dropped: ReadonlySet<string>,
  offered: ReadonlySet<string>,
): { value: unknown; label: string } | undefined {
  if (!isObject(choice)) return undefined;
  const type = choice["type"];
  // Forcing a dropped hosted tool: the model decides among what is left.
  if (typeof type === "string" && dropped.has(type)) return { value: "auto", label: "auto" };
  if (type === "function" && typeof choice["name"] === "string") {
    const flat = flatNameOf(choice["name"], choice["namespace"], names, offered);
    if (flat === undefined) return undefined;
    return { value: { type: "function", name: flat }, label: flat };
  }
  if (type === "allowed_tools" && Array.isArray(choice["tools"])) {
    const allowed = (choice["tools"] as unknown[]).flatMap((tool): unknown[] => {
      if (!isObject(tool)) return [tool];
      if (typeof tool["type"] === "string" && dropped.has(tool["type"])) return [];
      if (tool["type"] !== "function" || typeof tool["name"] !== "string") return [tool];
      const flat = flatNameOf(tool["name"], tool["namespace"], names, offered);
      return [flat === undefined ? tool : { type: "function", name: flat }];
    });
    return { value: { ...choice, tools: allowed }, label: "allowed_tools" };
  }
  return undefined;
}

/** The flat name a (namespace, name) choice refers to; undefined when it names a plain function. */
function flatNameOf(
  name: string,
  namespace: unknown,
  names: ReadonlyMap<string, NamespacedName>,
  offered: ReadonlySet<string>,
): string | undefined {
  if (typeof namespace === "string") {
    const flat = `${namespace}${NAMESPACE_SEPARATOR}${name}`;
    return names.has(flat) ? flat : undefined;
  }
  if (offered.has(name) && !names.has(name)) return undefined;
  for (const [flat, owner] of names) if (owner.name === name) return flat;
  return undefined;
}

/**
 * The history's namespaced calls under their flat names (Codex sends the whole conversation every turn), so the
 * engine re-renders the very tokens it generated and its prefix cache still matches.
 */
function flattenHistory(input: unknown): unknown[] | undefined {
  if (!Array.isArray(input)) return undefined;
  let changed = false;
  const out = input.map((item: unknown) => {
    if (!isObject(item) || item["type"] !== "function_call") return item;
    const namespace = item["namespace"];
    if (typeof namespace !== "string" || typeof item["name"] !== "string") return item;
    changed = true;
    const { namespace: _dropped, ...rest } = item;
    return { ...rest, name: `${namespace}${NAMESPACE_SEPARATOR}${item["name"]}` };
  });
  return changed ? out : undefined;
}
