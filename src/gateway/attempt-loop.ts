// Stage 4 of a completion: pick a backend, take a slot, run one attempt, fail over to the next on failure.
import type { PlacementHints } from "../affinity/decide.js";
import type { LookedUp, PlacementService } from "../affinity/placement-service.js";
import { SlotUnavailableError, type BackendSlots } from "../admission/backend-slots.js";
import type { FlowTicket } from "../admission/flow-queue/flow-ticket.js";
import type { Backend } from "../backends/backend.js";
import type { BackendRegistry } from "../backends/registry.js";
import type { Clock } from "../core/clock.js";
import { GatewayError } from "../core/errors.js";
import type { GatewayMetrics } from "../metrics/gateway-metrics.js";
import type { TierSource } from "../routing/tier-router.js";
import type { Adaptation } from "./adaptation/adapt-request.js";
import { AttemptAbort } from "./attempt-abort.js";
import { runAttempt, type AnswerSink, type AttemptEnv, type AttemptResult } from "./attempt.js";
import type { EngineOutcomes } from "./engine-outcomes.js";
import type { RequestContext } from "./request-context.js";
import { MessagesRelay } from "./messages-relay.js";
import { ResponsesRelay } from "./responses-relay.js";
import { SseRelay } from "./sse-relay.js";
import type { StreamReceipt, StreamRelay } from "./stream-relay.js";
import { AttemptFailure } from "./upstream-failure.js";
import type { UpstreamPools } from "./upstream-pools.js";
import { receiptFields, type PendingReceipt } from "../receipts/turn-receipts.js";

/** The loop's collaborators. */
export interface AttemptLoopDeps {
  readonly clock: Clock;
  readonly logger: { warn(fields: object, message: string): void };
  readonly registry: BackendRegistry;
  readonly scheduler: PlacementService;
  readonly slots: BackendSlots;
  readonly pools: UpstreamPools;
  readonly metrics: GatewayMetrics;
  readonly outcomes: EngineOutcomes;
}

/** What the loop reads of the request's live snapshot. */
export interface AttemptLimits {
  readonly settings: { readonly maxAttempts: number };
  readonly attemptEnv: AttemptEnv;
}

/** One request, routed: what every attempt of it sends. */
export interface RoutedRequest {
  tier: string;
  tierSource: TierSource;
  sessionId: string | undefined;
  /** Which of affinity.session_keys named the session (x_agent_serve.session_source). */
  sessionSource: string | undefined;
  /** The engine path (`/v1/chat/completions`, ...). */
  path: string;
  bodies: AttemptBodies;
  stream: boolean;
  /** The Responses API: its event stream, and the response id to remember. */
  responses: boolean;
  /** The Anthropic Messages API: its event stream. */
  messages: boolean;
  /** Only this backend may answer (it stores the conversation the request continues): no failover elsewhere. */
  onlyBackend: string | undefined;
  /** What placement reads of the body (the prompt prefix's key, computed only if read). */
  placement: PlacementHints;
  /** The session's binding as routing looked it up (PlacementService.lookup): the first attempt places by it. */
  binding?: LookedUp;
  /** What the gateway changed for the engine, and how to restore its answers for the client. */
  adaptation?: Adaptation | undefined;
  /** Its flow and band: who goes first when the engine is full (the gateway's own calls have none). */
  flow?: FlowTicket | undefined;
  /** The turn's route receipt in the making (src/receipts), when it is receipted. */
  receipt?: PendingReceipt | undefined;
}

/** The bodies an attempt may send: one per backend model (a tier's engines may serve different model ids). */
export interface AttemptBodies {
  forModel(model: string): Buffer;
  /** The client did not ask for usage in its stream: the relay drops the engine's usage chunk. */
  readonly stripUsage: boolean;
}

/**
 * Tries backends in the order the scheduler gives until one answers, at most settings.maxAttempts times.
 * Resolves with the answering attempt's result (its response already written); throws a GatewayError when no
 * attempt could answer, or the request's cancel reason.
 */
export async function runAttemptLoop(
  deps: AttemptLoopDeps,
  limits: AttemptLimits,
  request: RoutedRequest,
  res: AnswerSink,
  ctx: RequestContext,
): Promise<AttemptResult> {
  const { tier, sessionId } = request;
  const exclude = new Set<string>();
  // A relay is made when a stream reaches the client; what it relayed is charged if the stream ends early.
  let relay: StreamRelay | undefined;
  const restorer = request.adaptation?.restorer;
  const createRelay = request.responses
    ? (member: Buffer, receipt?: StreamReceipt): StreamRelay =>
        (relay = new ResponsesRelay(member, restorer, receipt))
    : request.messages
      ? (member: Buffer, receipt?: StreamReceipt): StreamRelay => (relay = new MessagesRelay(member, receipt))
      : (member: Buffer, receipt?: StreamReceipt): StreamRelay =>
          (relay = new SseRelay(member, request.bodies.stripUsage, receipt));
  let lastFailure: AttemptFailure | undefined;
  while (ctx.attempts < limits.settings.maxAttempts) {
    const tierBackends = deps.registry.tier(tier);
    // The tier's Backends are the candidates: their in-flight and queued counts are kept by BackendSlots,
    // their engine readings by the load poller, so nothing is built per request.
    const candidates =
      request.onlyBackend === undefined
        ? tierBackends
        : tierBackends.filter((b) => b.id === request.onlyBackend);
    // Later attempts look the binding up again: the failure broke it, or another turn may have moved it.
    const binding = ctx.attempts === 0 ? request.binding : undefined;
    const selection = await deps.scheduler.place(
      sessionId,
      tier,
      candidates,
      exclude,
      request.placement,
      binding,
    );
    if (selection === undefined) break;
    const { backend } = selection;
    ctx.attempts++;
    ctx.backend = backend.id;
    ctx.reason = selection.reason;
    ctx.affinityHit = selection.affinityHit;
    deps.metrics.selection(tier, selection.reason);
    if (ctx.attempts > 1) deps.metrics.retry(tier);

    const abort = new AttemptAbort();
    ctx.activeAttempt = abort;
    if (ctx.cancelReason !== undefined) throw ctx.cancelReason;
    const waitStartedMs = deps.clock.nowMs();
    try {
      const pending = deps.slots.acquire(backend, abort, request.flow);
      if (pending !== undefined) await pending;
    } catch (err) {
      if (!(err instanceof SlotUnavailableError)) throw err;
      lastFailure = new AttemptFailure("upstream_error", `backend ${backend.id}: ${err.message}`, false);
      exclude.add(backend.id);
      continue;
    } finally {
      const waitedMs = deps.clock.nowMs() - waitStartedMs;
      ctx.queueWaitMs += waitedMs;
      if (request.flow !== undefined) deps.metrics.flows.waited(request.flow.band, waitedMs / 1000);
    }

    let committed = false;
    try {
      const result = await runAttempt(
        limits.attemptEnv,
        {
          backend,
          upstream: deps.pools.get(backend),
          path: request.path,
          body: request.bodies.forModel(backend.model),
          stream: request.stream,
          meta: {
            session_id: sessionId ?? null,
            session_source: request.sessionSource ?? null,
            tier,
            tier_source: request.tierSource,
            backend_id: backend.id,
            affinity_hit: selection.affinityHit,
            reason: selection.reason,
            queue_wait_ms: Math.round(ctx.queueWaitMs),
            attempts: ctx.attempts,
            adapted: request.adaptation?.changes,
            receipt: undefined,
          },
          requestId: ctx.requestId,
          abort,
          cancelled: () => ctx.cancelReason,
          startedAtMs: ctx.startedAtMs,
          createRelay,
          readResponseId: request.responses,
          restoreBody: restorer === undefined ? undefined : (body) => restorer.body(body),
          upstreamHeaders: backend.upstreamHeaders,
          receipt:
            request.receipt === undefined
              ? undefined
              : (usage, responseId) => {
                  // On the context before the answer ends: the request's log line is written when it does.
                  const placement = {
                    backendId: backend.id,
                    tier,
                    reason: selection.reason,
                    expectedCachedTokens: selection.expectedCachedTokens,
                  };
                  const receipt = request.receipt!.now(usage, placement, responseId);
                  if (receipt?.expectedCachedTokens !== undefined)
                    deps.metrics.kvPrediction(tier, receipt.expectedCachedTokens, usage);
                  ctx.receipt = receipt;
                  return receipt === undefined ? undefined : receiptFields(receipt);
                },
          onCommit: () => {
            committed = true;
          },
        },
        res,
      );
      if (result.engineFault === true) deps.outcomes.failed(backend);
      else if (result.status < 500 && result.streamError === undefined) deps.outcomes.succeeded(backend);
      return result;
    } catch (err) {
      if (!(err instanceof AttemptFailure) || committed) throw err;
      lastFailure = err;
      exclude.add(backend.id);
      await attemptFailed(deps, sessionId, tier, backend, err.healthSignal);
      const cause = err.cause instanceof Error ? err.cause.message : undefined;
      deps.logger.warn(
        { reqId: ctx.requestId, backend: backend.id, err: err.message, cause },
        "attempt failed",
      );
    } finally {
      deps.slots.release(backend, request.flow);
      if (relay !== undefined) ctx.generatedEvents = relay.generatedEvents;
    }
  }
  if (lastFailure !== undefined) {
    // Every engine said it is overloaded and when to come back: a 503 that says so, not a 502.
    const retryAfterSeconds = lastFailure.retryAfterSeconds;
    throw new GatewayError(
      lastFailure.code,
      `${lastFailure.message}; ${ctx.attempts} attempt(s) made`,
      retryAfterSeconds === undefined ? {} : { retryAfterSeconds, status: 503 },
    );
  }
  throw new GatewayError("no_healthy_backend", `no healthy backend in tier '${tier}'`, {
    retryAfterSeconds: 5,
  });
}

/**
 * A failed attempt's two consequences, in this order. The session's binding to the backend is broken first
 * (awaited); then the failure counts against the backend's health. outcomes.failed() may mark the backend
 * down, and the registry tells its listeners synchronously, inside that call: the backend is retired (every
 * binding to it broken in the local view, see backend-changes.ts) before it returns. Breaking the session's
 * binding first means that retirement does not find it, so it is counted once (as this failure's), never
 * twice.
 */
async function attemptFailed(
  deps: Pick<AttemptLoopDeps, "scheduler" | "outcomes">,
  sessionId: string | undefined,
  tier: string,
  backend: Backend,
  healthSignal: boolean,
): Promise<void> {
  await deps.scheduler.onAttemptFailed(sessionId, tier, backend.id);
  if (healthSignal) deps.outcomes.failed(backend);
}
