// POST /v1/chat/completions, /v1/completions, /v1/responses and /v1/messages, in stages that read in order:
// admit -> parse -> route -> attempt loop -> answer and settle. Each stage lives in its own file, takes only
// what it needs and returns what it decided.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { LookedUp } from "../affinity/placement-service.js";
import { GatewayError } from "../core/errors.js";
import { adaptRequest } from "./adaptation/adapt-request.js";
import { flowTicket, serviceTokens } from "../admission/flow-queue/flow-ticket.js";
import { admit, estimatePromptTokens, reserveBudget, streamedUsage, type BudgetHold } from "./admit.js";
import { runAttemptLoop, type AttemptLoopDeps } from "./attempt-loop.js";
import { lastTurnText, parseCompletionRequest, type Endpoint } from "./completion-request.js";
import { readBody } from "./read-body.js";
import { identifySession } from "./session-identity.js";
import type { RequestContext } from "./request-context.js";
import { continuedConversation, rememberResponse } from "./response-chain.js";
import { routeRequest, type RouteDecision, type RouteDeps } from "./route-tier.js";
import type { GatewayParts, LiveState } from "./runtime.js";
import { UpstreamBodies } from "./upstream-body.js";
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
  Pick<GatewayParts, "clock" | "metrics" | "responseOwners" | "receipts">;

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
  const { clock } = deps;
  // 1. Admit: who asks, and whether their budget lets them in (the API key was checked by the server).
  const admission = admit(
    req.headersDistinct,
    ctx.apiKey,
    { budgetAnonymous: settings.config.admission.budget_anonymous },
    live.budgets,
    clock.nowMs(),
  );
  ctx.agentId = admission.agentId;

  // 2. Parse. Tools a stock engine would refuse are adapted; only then is the body re-encoded.
  const raw = await readBody(req, settings.maxBodyBytes);
  const request = parseCompletionRequest(raw, endpoint);
  if (settings.config.server.log_prompts) ctx.prompt = lastTurnText(request);
  const adaptation = adaptRequest(endpoint, request.body, settings.adaptation);
  if (adaptation !== undefined) ctx.adapted = adaptation.changes;

  // The session: the first of affinity.session_keys the request carries. A Responses request continuing a
  // stored response must reach the engine that stores it.
  const sessionKeys = settings.config.affinity.session_keys;
  const chained = endpoint === "responses" && (request.previousResponseId !== undefined || request.store);
  const identity = identifySession(req.headersDistinct, request.body, sessionKeys, chained);
  const named = typeof identity === "object" ? identity : undefined;
  const conversation = continuedConversation(
    deps,
    request,
    named?.key,
    ctx.requestId,
    identity !== undefined,
  );
  const sessionId = conversation.sessionKey;
  ctx.sessionId = sessionId;
  ctx.sessionSource = sessionId === undefined ? undefined : (named?.source ?? "responses_chain");
  // The receipt reads the session's previous turn now, alongside routing (src/receipts).
  const receipt =
    countTokens || !settings.config.affinity.receipts.enabled
      ? undefined
      : deps.receipts.begin(sessionId, request);
  // The budget hold starts now so that, with both stores in Redis, its round trip runs alongside the binding
  // lookup's instead of after it. A handler is attached at once (a refusal is awaited, and thrown, below).
  const holding = countTokens ? Promise.resolve(undefined) : reserveBudget(admission, request, clock.nowMs());
  void holding.catch(() => undefined);

  // 3. Route: one decision (tier, and the one engine a continued conversation must reach).
  let route: RouteDecision;
  let hold: BudgetHold | undefined;
  let binding: LookedUp;
  try {
    // The session's binding (with a shared store, as every replica sees it), looked up once for the turn:
    // routing reads it and the first attempt's placement decides by it.
    binding = await deps.scheduler.lookup(sessionId);
    // The previous turn's read ran alongside the lookup; the answer carries the receipt only once it is in (a
    // shared store's read is bounded by its timeout and fails open). In memory it is in already.
    if (receipt !== undefined && !receipt.loaded) await receipt.reading;
    const routing = routeRequest(
      deps,
      live,
      admission.client,
      sessionId,
      request,
      conversation,
      binding.binding,
    );
    route = routing instanceof Promise ? await routing : routing;
    ctx.tier = route.tier;
    hold = await holding;
  } catch (err) {
    // Routing failed: its error is the answer (as when the hold came after routing); a granted hold is freed.
    void holding.then(
      (granted) => granted?.settle(undefined, clock.nowMs()),
      () => undefined,
    );
    throw err;
  }

  // Who goes next when the engine is full: the request's flow (agent, else session) and priority band. The
  // flow is the client's whole session, not its thread: a burst of sub-agents is one program's service.
  const flow = flowTicket(settings.config.admission, {
    agentId: admission.agentId,
    sessionId: named?.clientId ?? sessionId,
    priority: admission.client.priority,
    keyMaxPriority: ctx.apiKey?.maxPriority,
    estimatedTokens: estimatePromptTokens(request),
  });
  ctx.band = flow.band;

  // 4. Attempt, 5. answer (written by the answering attempt), then settle.
  let usage: TokenUsage | undefined;
  try {
    const result = await runAttemptLoop(
      deps,
      live,
      {
        tier: route.tier,
        tierSource: route.source,
        sessionId,
        sessionSource: ctx.sessionSource,
        path: countTokens ? "/v1/messages/count_tokens" : PATHS[endpoint],
        bodies:
          adaptation === undefined
            ? new UpstreamBodies(raw, request, hold?.clampedMaxTokens)
            : new UpstreamBodies(
                Buffer.from(JSON.stringify(adaptation.body)),
                request,
                hold?.clampedMaxTokens,
                adaptation.body,
              ),
        adaptation,
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
      res,
      ctx,
    ).catch((err: unknown) => {
      throw route.onlyBackend === undefined ? err : namingTheConversation(err, request.previousResponseId!);
    });
    ctx.status = result.status;
    ctx.streamError = result.streamError;
    if (result.responseId !== undefined && request.store && sessionId !== undefined) {
      rememberResponse(deps, result.responseId, ctx.backend!, sessionId);
    }
    usage = countTokens ? undefined : result.usage;
    if (usage !== undefined) deps.metrics.tokens(route.tier, usage);
    if (usage !== undefined && receipt !== undefined && ctx.backend !== undefined) {
      const placement = { backendId: ctx.backend, tier: route.tier, reason: ctx.reason ?? "" };
      const settled = receipt.settle(usage, placement, result.responseId);
      ctx.receipt = settled instanceof Promise ? await settled : settled;
      deps.metrics.receipt(ctx.receipt);
    }
  } finally {
    // A failed request frees its hold; one that ran is charged what the engine reported, a stream that ended
    // before the engine's usage what it relayed.
    const used = usage ?? streamedUsage(request, ctx.generatedEvents);
    hold?.settle(used, clock.nowMs());
    deps.slots.charge(flow, serviceTokens(used));
    deps.metrics.flows.served(flow.flow, serviceTokens(used));
  }
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
