// POST /v1/chat/completions and /v1/completions: route to a tier, pick a backend, proxy, fail over.
import type { IncomingMessage, ServerResponse } from "node:http";
import { SlotUnavailableError } from "../admission/backend-slots.js";
import { GatewayError } from "../core/errors.js";
import { chooseTier } from "../routing/tier-router.js";
import { AttemptAbort } from "./attempt-abort.js";
import { runAttempt } from "./attempt.js";
import { authenticate } from "./client-auth.js";
import { parseClientHeaders } from "./client-headers.js";
import { parseCompletionRequest, type CompletionRequest, type Endpoint } from "./completion-request.js";
import { readBody } from "./read-body.js";
import type { RequestContext } from "./request-context.js";
import type { GatewayRuntime } from "./runtime.js";
import { UpstreamBodies } from "./upstream-body.js";
import { AttemptFailure } from "./upstream-failure.js";

const PATHS: Record<Endpoint, string> = { chat: "/v1/chat/completions", completions: "/v1/completions" };
/** The shared budget of requests without an agent, when admission.budget_anonymous is on. */
const ANONYMOUS = "(anonymous)";

export async function handleCompletion(
  rt: GatewayRuntime,
  endpoint: Endpoint,
  req: IncomingMessage,
  res: ServerResponse,
  ctx: RequestContext,
): Promise<void> {
  const client = parseClientHeaders(req.headers);
  ctx.sessionId = client.sessionId;
  const agentId = authenticate(req.headers, client.agentId, rt.settings.apiKeys);
  ctx.agentId = agentId;
  const budgetKey = agentId ?? (rt.settings.config.admission.budget_anonymous ? ANONYMOUS : undefined);
  if (budgetKey !== undefined) {
    const decision = rt.budgets.check(budgetKey, rt.clock.nowMs());
    if (!decision.allowed) {
      throw new GatewayError(
        "budget_exceeded",
        `agent '${budgetKey}' used ${decision.used} of its ${decision.budget} tokens in the budget window`,
        { retryAfterSeconds: decision.retryAfterSeconds },
      );
    }
  }
  const raw = await readBody(req, rt.settings.maxBodyBytes);
  const request = parseCompletionRequest(raw, endpoint);
  if (rt.settings.config.server.log_prompts) ctx.prompt = lastMessageText(request);

  const { registry, scheduler } = rt;
  const sessionTier = (): string | undefined => {
    if (client.sessionId === undefined) return undefined;
    const bound = scheduler.boundBackend(client.sessionId);
    return bound === undefined ? undefined : registry.get(bound)?.tier;
  };
  const decision = chooseTier(
    {
      hint: client.tierHint,
      model: request.model,
      promptChars: request.promptChars,
      toolFollowup: request.toolFollowup,
      sessionTier: request.toolFollowup ? sessionTier() : undefined,
    },
    registry,
    rt.settings.tiers,
  );
  const tier = decision.tier;
  ctx.tier = tier;

  const bodies = new UpstreamBodies(raw, request);
  const exclude = new Set<string>();
  let lastFailure: AttemptFailure | undefined;
  while (ctx.attempts < rt.settings.maxAttempts) {
    const selection = scheduler.selectBackend(client.sessionId, tier, registry.tier(tier), exclude, request);
    if (selection === undefined) break;
    const { backend } = selection;
    ctx.attempts++;
    ctx.backend = backend.id;
    ctx.reason = selection.reason;
    ctx.affinityHit = selection.affinityHit;
    rt.metrics.selection(tier, selection.reason);
    if (ctx.attempts > 1) rt.metrics.retry(tier);

    const abort = new AttemptAbort();
    ctx.activeAttempt = abort;
    if (ctx.cancelReason !== undefined) throw ctx.cancelReason;
    const waitStartedMs = rt.clock.nowMs();
    try {
      const pending = rt.slots.acquire(backend, abort);
      if (pending !== undefined) await pending;
    } catch (err) {
      if (err instanceof SlotUnavailableError) {
        lastFailure = new AttemptFailure("upstream_error", `backend ${backend.id}: ${err.message}`, false);
        exclude.add(backend.id);
        continue;
      }
      throw err;
    } finally {
      ctx.queueWaitMs += rt.clock.nowMs() - waitStartedMs;
    }

    let committed = false;
    try {
      const result = await runAttempt(
        rt,
        {
          backend,
          path: PATHS[endpoint],
          body: bodies.forModel(backend.model),
          stream: request.stream,
          meta: {
            session_id: client.sessionId ?? null,
            tier,
            backend_id: backend.id,
            affinity_hit: selection.affinityHit,
            reason: selection.reason,
            queue_wait_ms: Math.round(ctx.queueWaitMs),
            attempts: ctx.attempts,
          },
          headers: { "x-request-id": ctx.requestId },
          abort,
          cancelled: () => ctx.cancelReason,
          startedAtMs: ctx.startedAtMs,
          stripUsage: bodies.stripUsage,
          upstreamHeaders: backend.upstreamHeaders,
          onCommit: () => {
            committed = true;
          },
        },
        res,
      );
      ctx.status = result.status;
      ctx.streamError = result.streamError;
      if (result.usage !== undefined) {
        rt.metrics.tokens(tier, result.usage);
        if (budgetKey !== undefined) {
          rt.budgets.charge(
            budgetKey,
            result.usage.promptTokens + result.usage.completionTokens,
            rt.clock.nowMs(),
          );
        }
      }
      if (result.status < 500 && result.streamError === undefined)
        registry.recordOutcome(backend, true, "request");
      return;
    } catch (err) {
      if (!(err instanceof AttemptFailure) || committed) throw err;
      lastFailure = err;
      exclude.add(backend.id);
      // Break the session's binding first, so a health transition triggered below does not count it twice.
      scheduler.onAttemptFailed(client.sessionId, tier, backend.id);
      if (err.healthSignal) {
        registry.recordOutcome(backend, false, "request");
        rt.probeSoon(backend.id);
      }
      rt.logger.warn({ reqId: ctx.requestId, backend: backend.id, err: err.message }, "attempt failed");
    } finally {
      rt.slots.release(backend);
    }
  }
  if (lastFailure !== undefined) {
    throw new GatewayError(lastFailure.code, `${lastFailure.message}; ${ctx.attempts} attempt(s) made`);
  }
  throw new GatewayError("no_healthy_backend", `no healthy backend in tier '${tier}'`, {
    retryAfterSeconds: 5,
  });
}

/** The last message's text, for the log line when server.log_prompts is on. */
function lastMessageText(request: CompletionRequest): string {
  const messages = request.body["messages"];
  const source = Array.isArray(messages)
    ? (messages.at(-1) as Record<string, unknown>)["content"]
    : request.body["prompt"];
  const text = typeof source === "string" ? source : JSON.stringify(source ?? null);
  return text.length > 2000 ? `${text.slice(0, 2000)}...` : text;
}
