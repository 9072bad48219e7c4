// Stage 1 of a completion: who is asking (headers, API key) and whether their token budget lets them in.
import type { IncomingHttpHeaders } from "node:http";
import type { TokenBudgets } from "../admission/token-budgets.js";
import { GatewayError } from "../core/errors.js";
import { authenticate, type ApiKeyEntry } from "./client-auth.js";
import { parseClientHeaders, type ClientHeaders } from "./client-headers.js";
import type { TokenUsage } from "./usage.js";

/** The shared budget of requests without an agent, when admission.budget_anonymous is on. */
const ANONYMOUS = "(anonymous)";

export interface AdmitSettings {
  apiKeys: ReadonlyMap<string, ApiKeyEntry>;
  budgetAnonymous: boolean;
}

export interface Admission {
  client: ClientHeaders;
  /** The agent the request is charged to (API key's agent, else X-Agent-Id). */
  agentId: string | undefined;
  /** Whose budget is charged: the agent, the anonymous pool, or nobody. */
  budgetKey: string | undefined;
}

/** Validates the identity headers and the API key, and refuses an agent whose budget is spent (429). */
export function admit(
  headers: IncomingHttpHeaders,
  settings: AdmitSettings,
  budgets: TokenBudgets,
  nowMs: number,
): Admission {
  const client = parseClientHeaders(headers);
  const agentId = authenticate(headers, client.agentId, settings.apiKeys);
  const budgetKey = agentId ?? (settings.budgetAnonymous ? ANONYMOUS : undefined);
  if (budgetKey !== undefined) {
    const decision = budgets.check(budgetKey, nowMs);
    if (!decision.allowed) {
      throw new GatewayError(
        "budget_exceeded",
        `agent '${budgetKey}' used ${decision.used} of its ${decision.budget} tokens in the budget window`,
        { retryAfterSeconds: decision.retryAfterSeconds },
      );
    }
  }
  return { client, agentId, budgetKey };
}

/** Charges what the engine reported the request used to the admitted budget (the last stage). */
export function settle(admission: Admission, budgets: TokenBudgets, usage: TokenUsage, nowMs: number): void {
  if (admission.budgetKey === undefined) return;
  budgets.charge(admission.budgetKey, usage.promptTokens + usage.completionTokens, nowMs);
}
