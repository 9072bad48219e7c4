// Stage 1 of a completion: who is asking (headers, the API key the server checked) and whether their token
// budget lets them in; after parsing, the budget hold, whose settle() is the request's last step.
import type { BudgetStore } from "../admission/budget-store.js";
import type { Reservation } from "../admission/token-budgets.js";
import { GatewayError } from "../core/errors.js";
import { chargedAgent, type ApiKeyEntry, type DistinctHeaders } from "./client-auth.js";
import { parseClientHeaders, type ClientHeaders } from "./client-headers.js";
import type { CompletionRequest } from "./completion-request.js";
import type { TokenUsage } from "./usage.js";

/** The shared budget of requests without an agent, when admission.budget_anonymous is on. */
const ANONYMOUS = "(anonymous)";

export interface AdmitSettings {
  budgetAnonymous: boolean;
}

export interface Admission {
  client: ClientHeaders;
  /** The agent the request is charged to (API key's agent, else X-Agent-Id). */
  agentId: string | undefined;
  /** Whose budget is charged: the agent, the anonymous pool, or nobody. */
  budgetKey: string | undefined;
  /** The agent is an API key's own (authenticated): its budget entry is never evicted. */
  keyed: boolean;
  /** The store the request's hold is taken from and settled in (the snapshot's, for the whole request). */
  budgets: BudgetStore;
}

/**
 * Validates the identity headers (the API key was checked before, by the server, for every /v1 request) and
 * refuses an agent whose budget is spent (429).
 */
export function admit(
  headers: DistinctHeaders,
  key: ApiKeyEntry | undefined,
  settings: AdmitSettings,
  budgets: BudgetStore,
  nowMs: number,
): Admission {
  const client = parseClientHeaders(headers);
  const { agentId, keyed } = chargedAgent(key, client.agentId);
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
  return { client, agentId, budgetKey, keyed, budgets };
}

/**
 * Prompt tokens guessed from characters before any engine tokenized them: a third of the characters (English
 * runs at about four per token) plus the chat template's markers per message and per request. Settling
 * replaces the guess with the engine's count.
 */
export function estimatePromptTokens(request: CompletionRequest): number {
  return Math.ceil(request.promptChars / 3) + 8 * request.messageCount + 16;
}

/** Tokens held against an agent's budget while its request runs; settle() charges what it used and frees the rest. */
export class BudgetHold {
  constructor(
    private readonly budgets: BudgetStore,
    private readonly reservation: Reservation,
    /** The max_tokens the engine must get (the client's, lowered to what the budget has left), if changed. */
    readonly clampedMaxTokens: number | undefined,
  ) {}

  /** The last stage: charges what the engine reported (nothing when it reported nothing) and frees the hold. */
  settle(usage: TokenUsage | undefined, nowMs: number): void {
    const used = usage === undefined ? 0 : usage.promptTokens + usage.completionTokens;
    this.budgets.settle(this.reservation, used, nowMs);
  }
}

/**
 * Stage 2b, after parsing: holds the request's prompt estimate plus max_tokens (per choice) against the
 * budget while it runs, so concurrent requests cannot overspend it. A request asking for more than is left
 * (or naming no limit) gets max_tokens lowered to fit; nothing left at all is 429, a full agent table 503.
 */
export function reserveBudget(
  admission: Admission,
  request: CompletionRequest,
  nowMs: number,
): BudgetHold | undefined | Promise<BudgetHold | undefined> {
  const key = admission.budgetKey;
  return key === undefined ? undefined : reserveFor(key, admission, request, nowMs);
}

async function reserveFor(
  key: string,
  admission: Admission,
  request: CompletionRequest,
  nowMs: number,
): Promise<BudgetHold> {
  const { budgets } = admission;
  const prompt = estimatePromptTokens(request);
  const wanted = request.maxTokens === undefined ? Infinity : prompt + request.maxTokens * request.choices;
  const decision = await budgets.reserve(key, wanted, prompt + request.choices, nowMs, admission.keyed);
  if (!decision.allowed) {
    if (decision.reason === "table_full") {
      throw new GatewayError(
        "too_many_agents",
        `the budget table is full (admission.max_agents) of agents that spent tokens in the window; agent '${key}' cannot be tracked`,
        { retryAfterSeconds: decision.retryAfterSeconds },
      );
    }
    throw new GatewayError(
      "budget_exceeded",
      `agent '${key}' has ${Math.max(0, decision.budget - decision.used)} of its ${decision.budget} tokens left in the budget window (in-flight requests included); this request needs about ${prompt + request.choices}`,
      { retryAfterSeconds: decision.retryAfterSeconds },
    );
  }
  const fits = Math.floor((decision.granted - prompt) / request.choices);
  const clampedMaxTokens = request.maxTokens !== undefined && fits >= request.maxTokens ? undefined : fits;
  return new BudgetHold(budgets, decision.reservation, clampedMaxTokens);
}

/**
 * What a stream that ended early (cancelled, cut by the engine, the deadline) is charged when the engine's
 * usage never arrived: one token per generation event relayed, and the prompt's estimate, since an engine
 * that streamed a token had read the whole prompt. A stream that reached the client with nothing is free, as
 * is a request that failed before any byte: cancelling and retrying must not be free generation.
 */
export function streamedUsage(
  request: CompletionRequest,
  generatedEvents: number | undefined,
): TokenUsage | undefined {
  if (generatedEvents === undefined || generatedEvents <= 0) return undefined;
  return { promptTokens: estimatePromptTokens(request), completionTokens: generatedEvents, cachedTokens: 0 };
}
