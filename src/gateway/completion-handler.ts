// POST /v1/chat/completions, /v1/completions, /v1/responses and /v1/messages: a short composition of stages
// (turn-stages.ts, attempt-loop.ts) that read in order: admit -> parse -> identify -> route -> attempt -> settle.
// Each stage returns what it decided as a typed record, kept in the turn's record; the handler writes that record
// on the request's context once, when it ends, for the log line, the metrics, the trace and an error's answer
// (the server writes them when the response is done). The answer itself is the responder's (responder.ts).
import type { IncomingMessage, ServerResponse } from "node:http";
import type { FlowTicket } from "../admission/flow-queue/flow-ticket.js";
import { GatewayError } from "../core/errors.js";
import type { Receipt } from "../receipts/receipt-rules.js";
import { admit, type Admission, type BudgetHold } from "./admit.js";
import { runAttemptLoop, type AttemptLoopDeps, type AttemptsMade } from "./attempt-loop.js";
import type { CompletionRequest, Endpoint } from "./completion-request.js";
import type { RequestContext } from "./request-context.js";
import { OwnerWriteGate } from "./owner-write-gate.js";
import { readBody } from "./read-body.js";
import { liveOwner, rememberResponse } from "./response-chain.js";
import type { RouteDeps } from "./route-tier.js";
import type { GatewayParts, LiveState } from "./runtime.js";
import {
  chargeTurn,
  identifyTurn,
  parseTurn,
  routedRequest,
  routeTurn,
  settleAnswer,
  turnFlow,
  type ParsedTurn,
  type TurnSession,
} from "./turn-stages.js";
import type { TokenUsage } from "./usage.js";

/** What a completion uses of the gateway besides the request's live snapshot. */
export type CompletionDeps = AttemptLoopDeps &
  RouteDeps &
  Pick<GatewayParts, "clock" | "metrics" | "responseOwners" | "receipts" | "scheduler" | "slots">;

/** The turn's record: what each stage returned, as far as the turn got. */
interface TurnRecord {
  admission?: Admission;
  parsed?: ParsedTurn;
  session?: TurnSession;
  tier?: string;
  hold?: BudgetHold | undefined;
  flow?: FlowTicket;
  made?: AttemptsMade;
  usage?: TokenUsage | undefined;
  receipt?: Receipt | undefined;
}

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
  const turn: TurnRecord = {};
  try {
    const admission = admit(req.headersDistinct, ctx.apiKey, settings, live.budgets, deps.clock.nowMs());
    turn.admission = admission;
    const parsed = (turn.parsed = parseTurn(await readBody(req, settings.maxBodyBytes), endpoint, settings));
    const { request } = parsed;
    const identifying = identifyTurn(deps, req, endpoint, request, settings, ctx.requestId);
    const session = (turn.session = identifying instanceof Promise ? await identifying : identifying);
    const routing = routeTurn(deps, live, admission, parsed, session, !countTokens);
    const routed = routing instanceof Promise ? await routing : routing;
    turn.tier = routed.route.tier;
    const { holding } = routed;
    const hold = (turn.hold = holding instanceof Promise ? await holding : holding);
    const flow = (turn.flow = turnFlow(settings, admission, session, ctx.apiKey, request));
    const gate = ownerGate(deps, endpoint, request, session.sessionId, res);
    const attempts = routedRequest(endpoint, countTokens, parsed, session, routed, hold, flow);
    const made = (turn.made = await runAttemptLoop(deps, live, attempts, gate ?? res, ctx));
    if (made.result === undefined) throw unanswered(deps, made, request, routed.route.onlyBackend);
    const settling = settleAnswer(deps, parsed, session, routed, made, !countTokens, gate?.writtenId);
    ({ usage: turn.usage, receipt: turn.receipt } = settling instanceof Promise ? await settling : settling);
  } finally {
    const { flow, made } = turn;
    if (flow !== undefined)
      chargeTurn(deps, turn.parsed!.request, turn.hold, flow, turn.usage, made?.generatedEvents);
    recordTurn(ctx, turn);
  }
}

/**
 * With a shared owner store, a stored response's owner is written before its answer completes (read-your-writes
 * across replicas): the gate holds the answer's end until then.
 */
function ownerGate(
  deps: CompletionDeps,
  endpoint: Endpoint,
  request: CompletionRequest,
  sessionId: string | undefined,
  res: ServerResponse,
): OwnerWriteGate | undefined {
  if (endpoint !== "responses" || !request.store || sessionId === undefined || !deps.responseOwners.shared)
    return undefined;
  return new OwnerWriteGate(res, (id, backendId) => rememberResponse(deps, id, backendId, sessionId));
}

/** The turn's facts on the request's context, once, for its log line, metrics, trace and error answer. */
function recordTurn(ctx: RequestContext, turn: TurnRecord): void {
  const { parsed, session, made } = turn;
  ctx.agentId = turn.admission?.agentId;
  if (parsed?.prompt !== undefined) ctx.prompt = parsed.prompt;
  if (parsed?.adaptation !== undefined) ctx.adapted = parsed.adaptation.changes;
  ctx.sessionId = session?.sessionId;
  ctx.sessionSource = session?.source;
  if (turn.tier !== undefined) ctx.tier = turn.tier;
  if (turn.flow !== undefined) ctx.band = turn.flow.band;
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
  if (turn.receipt !== undefined) ctx.receipt = turn.receipt;
}

/**
 * Why no attempt answered. Continuing a stored response, an engine failure says which response's engine failed
 * (only that engine could answer: no failover).
 */
function unanswered(
  deps: CompletionDeps,
  made: AttemptsMade,
  request: CompletionRequest,
  onlyBackend: string | undefined,
): unknown {
  const err = made.error;
  if (onlyBackend === undefined) return err;
  // The owner left (a reload, discovery) or went down after the turn was routed to it: its state is lost, which
  // liveOwner says, rather than that the tier has no healthy backend.
  if (err instanceof GatewayError && err.code === "no_healthy_backend")
    liveOwner(deps.registry, request.previousResponseId!, onlyBackend);
  if (!(err instanceof GatewayError) || (err.code !== "upstream_error" && err.code !== "upstream_timeout"))
    return err;
  return new GatewayError(
    err.code,
    `the engine that stores response '${request.previousResponseId!}' failed, and no other engine can continue it: ${err.message}`,
    { param: "previous_response_id" },
  );
}
