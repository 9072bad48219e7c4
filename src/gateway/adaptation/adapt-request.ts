// Which adaptation a request gets, by API: the Responses API's tools (namespaces, hosted tools) or the Messages
// API's server tools and system text; chat and completions requests are never touched.
import type { Endpoint } from "../completion-request.js";
import { adaptMessagesSystem } from "./messages-system.js";
import { adaptMessagesRequest } from "./messages-tools.js";
import type { CallRestorer } from "./restore.js";
import { adaptResponsesRequest, type AdaptationSettings } from "./responses-tools.js";

export interface Adaptation {
  /** What changed, for the log line and x_agent_serve (e.g. `drop_tool:web_search`). */
  readonly changes: readonly string[];
  /** The body the engine gets. */
  readonly body: Record<string, unknown>;
  /** Restores the engine's answers for the client, when they name what was changed. */
  readonly restorer?: CallRestorer | undefined;
}

/** The request adapted for a stock engine; undefined when nothing had to change (the body is then sent as is). */
export function adaptRequest(
  endpoint: Endpoint,
  body: Record<string, unknown>,
  settings: AdaptationSettings,
): Adaptation | undefined {
  if (endpoint === "responses") return adaptResponsesRequest(body, settings);
  if (endpoint === "messages") {
    const tools = adaptMessagesRequest(body, settings);
    const system = adaptMessagesSystem(tools?.body ?? body, settings);
    if (system === undefined) return tools;
    return { changes: [...(tools?.changes ?? []), ...system.changes], body: system.body };
  }
  return undefined;
}
