// Stage 1 of a completion: who is asking (headers, API key) and whether their token budget lets them in.
import type { IncomingHttpHeaders } from "node:http";
import type { BudgetStore } from "../admission/budget-store.js";
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
  /** Tokens admission reserved in the budget (settled to the real usage at the end). */
  reservedTokens: number;
}

/** Validates the identity headers and the API key, and refuses an agent whose budget is spent (429). */
export async function admit(
  headers: IncomingHttpHeaders,
  settings: AdmitSettings,
  budgets: BudgetStore,
  nowMs: number,
): Promise<Admission> {
  const client = parseClientHeaders(headers);
  const agentId = authenticate(headers, client.agentId, settings.apiKeys);
  const budgetKey = agentId ?? (settings.budgetAnonymous ? ANONYMOUS : undefined);
  let reservedTokens = 0;
  if (budgetKey !== undefined) {
    const decision = await budgets.admit(budgetKey, 0, nowMs);
    if (decision.allowed) {
      reservedTokens = decision.reservedTokens;
    } else {
      throw new GatewayError(
        "budget_exceeded",
        `agent '${budgetKey}' used ${decision.used} of its ${decision.budget} tokens in the budget window`,
        { retryAfterSeconds: decision.retryAfterSeconds },
      );
    }
  }
  return { client, agentId, budgetKey, reservedTokens };
}

/** Charges what the engine reported the request used to the admitted budget (the last stage). */
export function settle(admission: Admission, budgets: BudgetStore, usage: TokenUsage, nowMs: number): void {
  if (admission.budgetKey === undefined) return;
  budgets.settle(
    admission.budgetKey,
    admission.reservedTokens,
    usage.promptTokens + usage.completionTokens,
    nowMs,
  );
}
