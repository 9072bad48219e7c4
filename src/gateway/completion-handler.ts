// POST /v1/chat/completions, /v1/completions, /v1/responses and /v1/messages: a short composition of stages
// (turn-stages.ts, attempt-loop.ts) that read in order: admit -> parse -> identify -> route -> attempt -> settle.
// Each stage returns what it decided; the handler records the turn's facts on the request's context once, when
// it ends, for the log line, the metrics and the trace (the server writes them when the response is done).
import type { IncomingMessage, ServerResponse } from "node:http";
import type { LookedUp } from "../affinity/placement-service.js";
import { flowTicket, type FlowTicket } from "../admission/flow-queue/flow-ticket.js";
import { GatewayError } from "../core/errors.js";
import type { Receipt } from "../receipts/receipt-rules.js";
import { admit, estimatePromptTokens, type Admission, type BudgetHold } from "./admit.js";
import { runAttemptLoop, type AttemptLoopDeps, type AttemptsMade } from "./attempt-loop.js";
import type { Endpoint } from "./completion-request.js";
import type { RequestContext } from "./request-context.js";
import { OwnerWriteGate } from "./owner-write-gate.js";
import { readBody } from "./read-body.js";
import { rememberResponse } from "./response-chain.js";
import { routeRequest, type RouteDecision, type RouteDeps } from "./route-tier.js";
import type { GatewayParts, LiveState } from "./runtime.js";
import {
  chargeTurn,
  identifyTurn,
  parseTurn,
  releaseHold,
  settleAnswer,
  startHold,
  upstreamBodies,
  type ParsedTurn,
  type TurnSession,
} from "./turn-stages.js";
import type { TokenUsage } from "./usage.js";

const PATHS: Record<Endpoint, string> = {
  chat: "/v1/chat/completions",
  completions: "/v1/completions",
  responses: "/v1/responses",
  messages: "/v1/messages",
};

/** What a completion uses of the gateway besides the request's live snapshot. */
export type CompletionDeps = AttemptLoopDeps &
  RouteDeps &
  Pick<GatewayParts, "clock" | "metrics" | "responseOwners" | "receipts" | "scheduler" | "slots">;

export async function handleCompletion(
  deps: CompletionDeps,
  live: LiveState,
  endpoint: Endpoint,
  req: IncomingMessage,
  res: ServerResponse,
  ctx: RequestContext,
  /** POST /v1/messages/count_tokens: placed like the conversation, answered by its engine, never charged. */
  countTokens = false,
): Promise<void> {
  const { settings } = live;
  const charged = !countTokens;
  let admission: Admission | undefined;
  let parsed: ParsedTurn | undefined;
  let session: TurnSession | undefined;
  let tier: string | undefined;
  let flow: FlowTicket | undefined;
  let hold: BudgetHold | undefined;
  let made: AttemptsMade | undefined;
  let usage: TokenUsage | undefined;
  let receipted: Receipt | undefined;
  try {
    // 1. Admit (the API key was checked by the server). 2. Parse, and name the session.
    admission = admit(req.headersDistinct, ctx.apiKey, settings, live.budgets, deps.clock.nowMs());
    parsed = parseTurn(await readBody(req, settings.maxBodyBytes), endpoint, settings);
    const { request } = parsed;
    const identifying = identifyTurn(deps, req, endpoint, request, settings, ctx.requestId);
    session = identifying instanceof Promise ? await identifying : identifying;
    const sessionId = session.sessionId;
    // 3. Route, with the budget hold and the previous turn's receipt read alongside.
    const receipt =
      charged && settings.receipts.enabled ? deps.receipts.begin(session.sessionId, request) : undefined;
    const holding = startHold(admission, request, charged, deps.clock.nowMs());
    let route: RouteDecision;
    let binding: LookedUp;
    try {
      // The session's binding, looked up once for the turn: routing reads it, the first attempt places by it.
      binding = await deps.scheduler.lookup(session.sessionId);
      // The answer carries the receipt only once the previous turn is in (a shared store's read is bounded).
      if (receipt !== undefined && !receipt.loaded) await receipt.reading;
      const routing = routeRequest(
        deps,
        live,
        admission.client,
        session.sessionId,
        request,
        session.conversation,
        binding.binding,
      );
      route = routing instanceof Promise ? await routing : routing;
    } catch (err) {
      releaseHold(holding, deps.clock);
      throw err;
    }
    tier = route.tier;
    hold = await holding;
    // Who goes next when the engine is full: the request's flow (agent, else the client's session) and band.
    flow = flowTicket(settings.admission, {
      agentId: admission.agentId,
      sessionId: session.flowSessionId,
      priority: admission.client.priority,
      keyMaxPriority: ctx.apiKey?.maxPriority,
      estimatedTokens: estimatePromptTokens(request),
    });
    // 4. Attempt (the answering attempt writes the answer), 5. settle. With a shared owner store, a stored
    // response's owner is written before its answer completes (read-your-writes across replicas).
    const gate =
      endpoint === "responses" && request.store && sessionId !== undefined && deps.responseOwners.shared
        ? new OwnerWriteGate(res, (id, backendId) => rememberResponse(deps, id, backendId, sessionId))
        : undefined;
    made = await runAttemptLoop(
      deps,
      live,
      {
        tier,
        tierSource: route.source,
        sessionId: session.sessionId,
        sessionSource: session.source,
        path: countTokens ? "/v1/messages/count_tokens" : PATHS[endpoint],
        bodies: upstreamBodies(parsed, hold),
        adaptation: parsed.adaptation,
        stream: request.stream,
        responses: endpoint === "responses",
        messages: endpoint === "messages",
        onlyBackend: route.onlyBackend,
        placement: request,
        binding,
        flow,
        receipt,
        continuable: countTokens ? undefined : { endpoint, body: request.body }, // [continuation]
      },
      gate ?? res,
      ctx,
    );
    if (made.result === undefined)
      throw route.onlyBackend === undefined
        ? made.error
        : namingTheConversation(made.error, request.previousResponseId!);
    const settling = settleAnswer(deps, parsed, session, tier, made, receipt, charged, gate?.writtenId);
    ({ usage, receipt: receipted } = settling instanceof Promise ? await settling : settling);
  } finally {
    if (flow !== undefined) chargeTurn(deps, parsed!.request, hold, flow, usage, made?.generatedEvents);
    recordTurn(ctx, admission, parsed, session, tier, flow, made, receipted);
  }
}

/** The turn's facts on the request's context, once, for its log line, metrics and trace. */
function recordTurn(
  ctx: RequestContext,
  admission: Admission | undefined,
  parsed: ParsedTurn | undefined,
  session: TurnSession | undefined,
  tier: string | undefined,
  flow: FlowTicket | undefined,
  made: AttemptsMade | undefined,
  receipt: Receipt | undefined,
): void {
  ctx.agentId = admission?.agentId;
  if (parsed?.prompt !== undefined) ctx.prompt = parsed.prompt;
  if (parsed?.adaptation !== undefined) ctx.adapted = parsed.adaptation.changes;
  ctx.sessionId = session?.sessionId;
  ctx.sessionSource = session?.source;
  if (tier !== undefined) ctx.tier = tier;
  if (flow !== undefined) ctx.band = flow.band;
  if (made !== undefined) {
    const selection = made.selection;
    ctx.attempts = made.attempts;
    ctx.queueWaitMs = made.queueWaitMs;
    if (selection !== undefined) {
      ctx.backend = selection.backend.id;
      ctx.reason = selection.reason;
      ctx.affinityHit = selection.affinityHit;
    }
    if (made.result !== undefined) ctx.streamError = made.result.streamError;
    if (made.broken !== undefined) {
      ctx.streamError ??= made.broken.message;
      ctx.streamErrorCode = made.broken.code;
      ctx.streamErrorCause = made.broken.cause;
    }
    if (made.migrated !== undefined) ctx.migrated = made.migrated;
  }
  if (receipt !== undefined) ctx.receipt = receipt;
}

/** An engine failure while continuing a stored response: say which response's engine failed (no failover). */
function namingTheConversation(err: unknown, responseId: string): unknown {
  if (!(err instanceof GatewayError) || (err.code !== "upstream_error" && err.code !== "upstream_timeout"))
    return err;
  return new GatewayError(
    err.code,
    `the engine that stores response '${responseId}' failed, and no other engine can continue it: ${err.message}`,
    { param: "previous_response_id" },
  );
}
