// The stages of a completion turn that the handler composes (completion-handler.ts): each takes only what it
// needs and returns what it decided as a typed record; none writes the request's context.
import type { IncomingMessage } from "node:http";
import type { LookedUp } from "../affinity/placement-service.js";
import { flowTicket, serviceTokens, type FlowTicket } from "../admission/flow-queue/flow-ticket.js";
import type { Clock } from "../core/clock.js";
import type { PendingReceipt } from "../receipts/turn-receipts.js";
import type { Receipt } from "../receipts/receipt-rules.js";
import { adaptRequest, type Adaptation } from "./adaptation/adapt-request.js";
import {
  estimatePromptTokens,
  reserveBudget,
  streamedUsage,
  type Admission,
  type BudgetHold,
} from "./admit.js";
import type { AttemptsMade, RoutedRequest } from "./attempt-loop.js";
import type { ApiKeyEntry } from "./client-auth.js";
import {
  lastTurnText,
  parseCompletionRequest,
  type CompletionRequest,
  type Endpoint,
} from "./completion-request.js";
import { continuedConversation, rememberResponse, type Conversation } from "./response-chain.js";
import { routeRequest, type RouteDecision } from "./route-tier.js";
import type { LiveState } from "./runtime.js";
import { identifySession } from "./session-identity.js";
import type { CompletionDeps } from "./completion-handler.js";
import type { GatewaySettings } from "./settings.js";
import { UpstreamBodies } from "./upstream-body.js";
import type { TokenUsage } from "./usage.js";

/** Stage 2: the request as read and parsed, and what the gateway changes in it for the engine. */
export interface ParsedTurn {
  readonly raw: Buffer;
  readonly request: CompletionRequest;
  /** Tools a stock engine would refuse, adapted (undefined: the body goes as sent). */
  readonly adaptation: Adaptation | undefined;
  /** The last message, only when server.log_prompts is on. */
  readonly prompt: string | undefined;
}

/** Parses the body read (readBody) as `endpoint`'s request and adapts what a stock engine would refuse. */
export function parseTurn(raw: Buffer, endpoint: Endpoint, settings: GatewaySettings): ParsedTurn {
  const request = parseCompletionRequest(raw, endpoint);
  return {
    raw,
    request,
    adaptation: adaptRequest(endpoint, request.body, settings.adaptation),
    prompt: settings.logPrompts ? lastTurnText(request) : undefined,
  };
}

/** The session a turn belongs to, and the conversation it continues. */
export interface TurnSession {
  /** The affinity key (undefined: no session). */
  readonly sessionId: string | undefined;
  /** Which of affinity.session_keys named it (`responses_chain` for a Responses chain's own key). */
  readonly source: string | undefined;
  /** The client's session id as sent (its flow is the whole program's), else the affinity key. */
  readonly flowSessionId: string | undefined;
  readonly conversation: Conversation;
}

/**
 * The session: the first of affinity.session_keys the request carries. A Responses request continuing a
 * stored response must reach the engine that stores it.
 */
export function identifyTurn(
  deps: CompletionDeps,
  req: IncomingMessage,
  endpoint: Endpoint,
  request: CompletionRequest,
  settings: GatewaySettings,
  requestId: string,
): TurnSession | Promise<TurnSession> {
  const chained = endpoint === "responses" && (request.previousResponseId !== undefined || request.store);
  const identity = identifySession(req.headersDistinct, request.body, settings.sessionKeys, chained);
  const named = typeof identity === "object" ? identity : undefined;
  const continued = continuedConversation(deps, request, named?.key, requestId, identity !== undefined);
  const sessionOf = (conversation: Conversation): TurnSession => {
    const sessionId = conversation.sessionKey;
    return {
      sessionId,
      source: sessionId === undefined ? undefined : (named?.source ?? "responses_chain"),
      flowSessionId: named?.clientId ?? sessionId,
      conversation,
    };
  };
  // With a shared owner store, an id this replica never saw costs one round trip.
  return continued instanceof Promise ? continued.then(sessionOf) : sessionOf(continued);
}

/** Stage 3: the turn's tier and its session's binding, with its budget hold and receipt read alongside. */
export interface RoutedTurn {
  readonly route: RouteDecision;
  /** The session's binding, looked up once for the turn: routing reads it, the first attempt places by it. */
  readonly binding: LookedUp;
  /**
   * The budget hold (awaited once the tier is known: a refusal's answer still names the tier); no promise when
   * the request is not charged to a budget.
   */
  readonly holding: Holding;
  /** The turn's route receipt in the making, when it is receipted. */
  readonly receipt: PendingReceipt | undefined;
}

type Holding = BudgetHold | undefined | Promise<BudgetHold | undefined>;

/**
 * Routes the turn. The budget hold starts first, so that with both stores in Redis its round trip runs
 * alongside the binding lookup's; the answer carries the receipt only once the previous turn is in (a shared
 * store's read is bounded). Routing failed: its error is the answer, and a hold granted meanwhile is freed.
 * With the memory stores every step answers at once, and so does this (no promise, no microtask).
 */
export function routeTurn(
  deps: CompletionDeps,
  live: LiveState,
  admission: Admission,
  parsed: ParsedTurn,
  session: TurnSession,
  charged: boolean,
): RoutedTurn | Promise<RoutedTurn> {
  const { request } = parsed;
  const { sessionId } = session;
  const receipt =
    charged && live.settings.receipts.enabled ? deps.receipts.begin(sessionId, request) : undefined;
  const holding = charged ? reserveBudget(admission, request, deps.clock.nowMs()) : undefined;
  if (holding instanceof Promise) void holding.catch(() => undefined);
  try {
    const looking = deps.scheduler.lookup(sessionId);
    if (!(looking instanceof Promise) && (receipt === undefined || receipt.loaded)) {
      const routed = routeBy(deps, live, admission, request, session, looking, holding, receipt);
      return routed instanceof Promise
        ? routed.catch((err: unknown) => freeHold(deps, holding, err))
        : routed;
    }
    return (async () => {
      const binding = await looking;
      if (receipt !== undefined && !receipt.loaded) await receipt.reading;
      return routeBy(deps, live, admission, request, session, binding, holding, receipt);
    })().catch((err: unknown) => freeHold(deps, holding, err));
  } catch (err) {
    return freeHold(deps, holding, err);
  }
}

/** routeTurn() once the session's binding is known (and the previous turn's receipt read). */
function routeBy(
  deps: CompletionDeps,
  live: LiveState,
  admission: Admission,
  request: CompletionRequest,
  session: TurnSession,
  binding: LookedUp,
  holding: Holding,
  receipt: PendingReceipt | undefined,
): RoutedTurn | Promise<RoutedTurn> {
  const { sessionId, conversation } = session;
  const routing = routeRequest(
    deps,
    live,
    admission.client,
    sessionId,
    request,
    conversation,
    binding.binding,
  );
  return routing instanceof Promise
    ? routing.then((route) => ({ route, binding, holding, receipt }))
    : { route: routing, binding, holding, receipt };
}

/** Routing failed: a hold granted meanwhile is freed, and the failure goes on. */
function freeHold(deps: CompletionDeps, holding: Holding, err: unknown): never {
  if (holding instanceof Promise) {
    void holding.then(
      (granted) => granted?.settle(undefined, deps.clock.nowMs()),
      () => undefined,
    );
  } else holding?.settle(undefined, deps.clock.nowMs());
  throw err;
}

/** Who goes next when the engine is full: the request's flow (its agent, else the client's session) and band. */
export function turnFlow(
  settings: GatewaySettings,
  admission: Admission,
  session: TurnSession,
  apiKey: ApiKeyEntry | undefined,
  request: CompletionRequest,
): FlowTicket {
  return flowTicket(settings.admission, {
    agentId: admission.agentId,
    sessionId: session.flowSessionId,
    priority: admission.client.priority,
    keyMaxPriority: apiKey?.maxPriority,
    estimatedTokens: estimatePromptTokens(request),
  });
}

const PATHS: Record<Endpoint, string> = {
  chat: "/v1/chat/completions",
  completions: "/v1/completions",
  responses: "/v1/responses",
  messages: "/v1/messages",
};

/** Stage 4's input: what every attempt of the turn sends, and where (count_tokens: placed, never charged). */
export function routedRequest(
  endpoint: Endpoint,
  countTokens: boolean,
  parsed: ParsedTurn,
  session: TurnSession,
  routed: RoutedTurn,
  hold: BudgetHold | undefined,
  flow: FlowTicket,
): RoutedRequest {
  const { request } = parsed;
  return {
    tier: routed.route.tier,
    tierSource: routed.route.source,
    sessionId: session.sessionId,
    sessionSource: session.source,
    path: countTokens ? "/v1/messages/count_tokens" : PATHS[endpoint],
    bodies: upstreamBodies(parsed, hold),
    adaptation: parsed.adaptation,
    stream: request.stream,
    responses: endpoint === "responses",
    messages: endpoint === "messages",
    onlyBackend: routed.route.onlyBackend,
    placement: request,
    binding: routed.binding,
    flow,
    receipt: routed.receipt,
    continuable: countTokens ? undefined : { endpoint, body: request.body }, // [continuation]
  };
}

/** The bodies every attempt of the turn may send (re-encoded only when the gateway adapted the request). */
export function upstreamBodies(parsed: ParsedTurn, hold: BudgetHold | undefined): UpstreamBodies {
  const { adaptation, request } = parsed;
  return adaptation === undefined
    ? new UpstreamBodies(parsed.raw, request, hold?.clampedMaxTokens)
    : new UpstreamBodies(
        Buffer.from(JSON.stringify(adaptation.body)),
        request,
        hold?.clampedMaxTokens,
        adaptation.body,
      );
}

/** Stage 5: what the answered turn used, and its receipt. */
export interface SettledTurn {
  readonly usage: TokenUsage | undefined;
  readonly receipt: Receipt | undefined;
}

const NOT_SETTLED: SettledTurn = { usage: undefined, receipt: undefined };

/**
 * An answered turn: its response remembered (Responses API), its tokens counted, its receipt settled (the
 * previous turn is in by now: the receipt is ready at once).
 */
export function settleAnswer(
  deps: CompletionDeps,
  parsed: ParsedTurn,
  session: TurnSession,
  routed: RoutedTurn,
  made: AttemptsMade,
  charged: boolean,
  /** The owner already written while the answer streamed (owner-write-gate.ts), not to be written again. */
  ownerWritten: string | undefined,
): SettledTurn | Promise<SettledTurn> {
  const result = made.result!;
  const backend = made.selection?.backend;
  const { tier } = routed.route;
  const { receipt } = routed;
  if (
    result.responseId !== undefined &&
    parsed.request.store &&
    session.sessionId !== undefined &&
    ownerWritten !== result.responseId
  )
    void rememberResponse(deps, result.responseId, backend!.id, session.sessionId);
  const usage = charged ? result.usage : undefined;
  if (usage === undefined) return NOT_SETTLED;
  deps.metrics.tokens(tier, usage);
  if (receipt === undefined || backend === undefined) return { usage, receipt: undefined };
  const { reason, expectedCachedTokens } = made.selection!;
  const placement = { backendId: backend.id, tier, reason, expectedCachedTokens };
  const settling = receipt.settle(usage, placement, result.responseId);
  if (settling instanceof Promise) return settling.then((settled) => receipted(deps, usage, settled));
  return receipted(deps, usage, settling);
}

function receipted(deps: CompletionDeps, usage: TokenUsage, receipt: Receipt): SettledTurn {
  deps.metrics.receipt(receipt);
  return { usage, receipt };
}

/**
 * Charges the turn: a failed request frees its hold; one that ran is charged what the engine reported, a
 * stream that ended before the engine's usage what it relayed. Its flow's service is corrected likewise.
 */
export function chargeTurn(
  deps: Pick<CompletionDeps, "slots" | "metrics"> & { readonly clock: Clock },
  request: CompletionRequest,
  hold: BudgetHold | undefined,
  flow: FlowTicket,
  usage: TokenUsage | undefined,
  generatedEvents: number | undefined,
): void {
  const used = usage ?? streamedUsage(request, generatedEvents);
  hold?.settle(used, deps.clock.nowMs());
  deps.slots.charge(flow, serviceTokens(used));
  deps.metrics.flows.served(flow.flow, serviceTokens(used));
}
