// Which flow and band a request waits in, from who it is (already authenticated and parsed) and the config.
import type { GatewayConfig } from "../../config/schema.js";

/** The shared flow of requests with neither an agent nor a session. */
export const ANONYMOUS_FLOW = "(anonymous)";

/** One request's place in the flow scheduler, kept across its attempts. */
export interface FlowTicket {
  readonly flow: string;
  readonly band: number;
  /** An agent's request: held to admission.max_inflight_per_agent. */
  readonly capped: boolean;
  /** Service is charged as tokens / weight. */
  readonly weight: number;
  /** Tokens charged when it first started (an estimate, corrected when it ends). */
  readonly estimatedTokens: number;
  /** Tokens charged so far (0 until it starts). */
  chargedTokens: number;
}

/** The ticket of the gateway's own calls (the tier classifier): one flow, default band, no cap, no charge. */
export function gatewayTicket(band: number): FlowTicket {
  return { flow: "(gateway)", band, capped: false, weight: 1, estimatedTokens: 0, chargedTokens: 0 };
}

export interface FlowIdentity {
  /** The agent the request is charged to (an API key's agent, else X-Agent-Id). */
  agentId: string | undefined;
  sessionId: string | undefined;
  /** X-Priority as sent (an integer), if sent. */
  priority: number | undefined;
  /** The API key's max_priority, if the key sets one. */
  keyMaxPriority: number | undefined;
  estimatedTokens: number;
}

/**
 * The flow is the agent, else the session (`session:<id>`), else the anonymous flow. The band is the agent's configured band
 * (else default_band); X-Priority replaces it, clamped to [0, the highest the key or config allows], and never
 * above the bands that exist. A client can always lower its own priority.
 */
export function flowTicket(admission: GatewayConfig["admission"], who: FlowIdentity): FlowTicket {
  const { scheduling } = admission;
  const agent = who.agentId === undefined ? undefined : scheduling.agents[who.agentId];
  const configured = agent?.band ?? scheduling.default_band;
  const allowed = Math.max(
    configured,
    who.keyMaxPriority ?? scheduling.max_header_priority ?? scheduling.default_band,
  );
  const band =
    who.priority === undefined
      ? configured
      : Math.max(0, Math.min(who.priority, allowed, scheduling.bands - 1));
  return {
    // A session's flow is named apart from the agents', so a session id never shares an agent's service.
    flow: who.agentId ?? (who.sessionId === undefined ? ANONYMOUS_FLOW : `session:${who.sessionId}`),
    band,
    capped: who.agentId !== undefined,
    weight: agent?.weight ?? 1,
    estimatedTokens: who.estimatedTokens,
    chargedTokens: 0,
  };
}

/**
 * The service a request's usage counts for: prompt tokens the engine had to compute (not those from its prefix
 * cache) plus the tokens it generated; a request that used nothing (it failed) counts nothing.
 */
export function serviceTokens(
  usage: { promptTokens: number; completionTokens: number; cachedTokens: number } | undefined,
): number {
  if (usage === undefined) return 0;
  return Math.max(0, usage.promptTokens - usage.cachedTokens) + usage.completionTokens;
}
