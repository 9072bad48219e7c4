// Stage 4 of a completion: pick a backend, take a slot, run one attempt, fail over to the next on failure; what
// it did is returned (attempts, queue wait, placement, the answer or the error), never written on the request.
import type { PlacementHints, Selection } from "../affinity/decide.js";
import type { LookedUp, Placed, PlacementService } from "../affinity/placement-service.js";
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
import {
  runAttempt,
  type AnswerSink,
  type AttemptEnv,
  type AttemptPlan,
  type AttemptResult,
} from "./attempt.js";
import type { EngineOutcomes } from "./engine-outcomes.js";
import type { RequestContext } from "./request-context.js";
import { MessagesRelay } from "./messages-relay.js";
import { ResponsesRelay } from "./responses-relay.js";
import { SseRelay } from "./sse-relay.js";
import type { StreamReceipt, StreamRelay } from "./stream-relay.js";
import { AttemptFailure } from "./upstream-failure.js";
import type { TokenUsage } from "./usage.js";
import type { UpstreamPools } from "./upstream-pools.js";
import { receiptFields, type PendingReceipt } from "../receipts/turn-receipts.js";
import type { Endpoint } from "./completion-request.js";
import { ClientClosedError } from "./client-closed.js";
import { withEngineSessionHeader } from "./engine-session-header.js";
import type { ContinuationSettings } from "./continuation/eligibility.js";
import { StreamMigration, type MigrationOutcome } from "./continuation/stream-migration.js";

/** Where the loop places each attempt: the placement service (affinity/placement-service.ts). */
export type Placer = Pick<PlacementService, "place" | "onAttemptFailed"> &
  Partial<Pick<PlacementService, "attemptEnded">>;

/** Where an attempt takes its engine slot (admission/backend-slots.ts): at once, or after a wait. */
export type Slots = Pick<BackendSlots, "acquire" | "release">;

/** What the loop tells the rest of the gateway: metrics, and the engines' passive health (engine-outcomes.ts). */
export interface AttemptRecorder {
  selection(tier: string, reason: string): void;
  retry(tier: string): void;
  /** A wait for a slot ended (band: the request's priority band). */
  waited(band: number, seconds: number): void;
  succeeded(backend: Backend): void;
  failed(backend: Backend): void;
  /** How a stream continued on another engine ended (agentserve_migrations_total{outcome}). */
  migration(outcome: MigrationOutcome): void;
  /** What the KV-event index predicted the engine would have cached, against what it reported. */
  kvPrediction(tier: string, expectedCachedTokens: number, usage: TokenUsage): void;
}

/** One attempt on one engine: runAttempt (attempt.ts) in the gateway, a fake in the loop's unit test. */
export type AttemptRunner = (env: AttemptEnv, plan: AttemptPlan, res: AnswerSink) => Promise<AttemptResult>;

/** The loop's collaborators: small interfaces, each satisfied by one of the gateway's parts. */
export interface AttemptLoopDeps {
  readonly clock: Clock;
  readonly logger: { warn(fields: object, message: string): void };
  /** The tier's backends, the candidates of every attempt. */
  readonly registry: Pick<BackendRegistry, "tier">;
  readonly scheduler: Placer;
  readonly slots: Slots;
  readonly pools: Pick<UpstreamPools, "get">;
  readonly recorder: AttemptRecorder;
  /** runAttempt unless given (tests drive the loop without sockets). */
  readonly runAttempt?: AttemptRunner;
}

/** The recorder of a gateway's parts: its metrics and its engines' outcomes (built once, at wiring). */
export function attemptRecorder(
  metrics: Pick<GatewayMetrics, "selection" | "retry" | "flows" | "migration" | "kvPrediction">,
  outcomes: Pick<EngineOutcomes, "succeeded" | "failed">,
): AttemptRecorder {
  return {
    selection: (tier, reason) => metrics.selection(tier, reason),
    retry: (tier) => metrics.retry(tier),
    waited: (band, seconds) => metrics.flows.waited(band, seconds),
    succeeded: (backend) => outcomes.succeeded(backend),
    failed: (backend) => outcomes.failed(backend),
    migration: (outcome) => metrics.migration(outcome),
    kvPrediction: (tier, expected, usage) => metrics.kvPrediction(tier, expected, usage),
  };
}

/** What the loop reads of the request's live snapshot. */
export interface AttemptLimits {
  readonly settings: { readonly maxAttempts: number; readonly continuation?: ContinuationSettings };
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
  /** [continuation] The client's API and body, when its stream may be continued on another engine. */
  continuable?: { endpoint: Endpoint; body: Record<string, unknown> } | undefined;
}

/** The bodies an attempt may send: one per backend model (a tier's engines may serve different model ids). */
export interface AttemptBodies {
  forModel(model: string): Buffer;
  /** The client did not ask for usage in its stream: the relay drops the engine's usage chunk. */
  readonly stripUsage: boolean;
}

/**
 * What the loop reads of the request (its id, when it arrived, why it was cancelled) and the one thing it
 * writes there: the attempt in progress, so that cancelling the request stops it.
 */
export type CancellableRequest = Pick<
  RequestContext,
  "requestId" | "startedAtMs" | "cancelReason" | "activeAttempt"
>;

/** What the loop found out, returned to its caller (never written on the request's context). */
export interface AttemptsMade {
  /** Attempts placed on an engine (0: none could be placed). */
  attempts: number;
  /** Time spent waiting for engine slots, over all attempts. */
  queueWaitMs: number;
  /** The last attempt's placement: the answering one's when an attempt answered. */
  selection: Selection<Backend> | undefined;
  /** Generation events of a stream that reached the client (charged when the engine's usage never came). */
  generatedEvents: number | undefined;
  /** The answering attempt's result (its response already written); undefined when none answered. */
  result: AttemptResult | undefined;
  /** Why no attempt answered: a GatewayError, or the request's cancel reason. */
  error: unknown;
  /** The last attempt's answer began to reach the client: nothing may be tried after it. */
  committed: boolean;
  /** A stream that ended in an error event after bytes reached the client: the error, its code and cause. */
  broken: { message: string; code: string | undefined; cause: string | undefined } | undefined;
  /** [continuation] How continuing the answer on another engine went, for the log line. */
  migrated: string | undefined;
}

/**
 * Tries backends in the order the scheduler gives until one answers, at most settings.maxAttempts times.
 * Resolves with what it did: the answering attempt's result (its response already written), or the error
 * that no attempt could answer (the caller answers it), with the attempts, queue wait and placement either way.
 */
export async function runAttemptLoop(
  deps: AttemptLoopDeps,
  limits: AttemptLimits,
  request: RoutedRequest,
  res: AnswerSink,
  ctx: CancellableRequest,
): Promise<AttemptsMade> {
  const made: AttemptsMade = {
    attempts: 0,
    queueWaitMs: 0,
    selection: undefined,
    generatedEvents: undefined,
    result: undefined,
    error: undefined,
    committed: false,
    broken: undefined,
    migrated: undefined,
  };
  // [continuation] A stream its engine breaks mid-answer may go on on the next engine (src/gateway/continuation).
  // The fields are written out, not spread: a spread plus new members cost microseconds per request in V8.
  const continuable = request.continuable;
  const migration =
    continuable === undefined || limits.settings.continuation === undefined || !request.stream
      ? undefined
      : StreamMigration.begin(
          {
            endpoint: continuable.endpoint,
            body: continuable.body,
            stream: request.stream,
            stripUsage: request.bodies.stripUsage,
            tier: request.tier,
            restorer: request.adaptation?.restorer,
          },
          limits.settings.continuation,
        );
  const exclude = new Set<string>();
  const relays = new RelayMaker(request, migration);
  let lastFailure: AttemptFailure | undefined;
  try {
    while (made.attempts < limits.settings.maxAttempts) {
      // Later attempts look the binding up again: the failure broke it, or another turn may have moved it.
      const placing = placeNext(deps, request, exclude, made.attempts === 0 ? request.binding : undefined);
      const selection = placing instanceof Promise ? await placing : placing;
      if (selection === undefined) break;
      const { backend } = selection;
      made.attempts++;
      made.selection = selection;
      deps.recorder.selection(request.tier, selection.reason);
      const continuing = migration?.pending === true; // [continuation]
      if (!continuing && made.attempts > 1) deps.recorder.retry(request.tier);

      // However the attempt ends, the prompt's pending KV blocks on its engine are let go (src/kv-events).
      try {
        const abort = new AttemptAbort();
        ctx.activeAttempt = abort;
        if (ctx.cancelReason !== undefined) throw ctx.cancelReason;
        // The common case takes a free slot at once, without a promise.
        const taking = takeSlot(deps, backend, abort, request.flow, made);
        const slotFailure = taking === undefined ? undefined : await taking;
        if (slotFailure !== undefined) {
          lastFailure = slotFailure;
          exclude.add(backend.id);
          continue;
        }
        try {
          const sending = sentNow(selection);
          const sent = sending instanceof Promise ? await sending : sending;
          made.selection = sent;
          // Announcing the send to the other replicas took a moment (src/kv-events): the client may have left.
          if (ctx.cancelReason !== undefined) throw ctx.cancelReason;
          const plan = planOf(deps, request, ctx, sent, abort, relays, made, migration, continuing);
          const result = await (deps.runAttempt ?? runAttempt)(limits.attemptEnv, plan, res);
          // [continuation] Left open by a break: the next engine of the session's ranking goes on with it.
          if (result.broken !== undefined && migration !== undefined) {
            migration.broke(result.broken, backend.id);
            made.migrated = migration.describe(undefined);
            exclude.add(backend.id);
            await attemptFailed(deps, request.sessionId, request.tier, backend, result.broken.engineFault);
            deps.logger.warn(
              {
                reqId: ctx.requestId,
                backend: backend.id,
                err: result.broken.message,
                cause: result.broken.cause,
              },
              "stream broken mid-answer; continuing it on another engine",
            );
            continue;
          }
          const outcome = migration?.outcome(result);
          if (outcome !== undefined) deps.recorder.migration(outcome);
          if (result.engineFault === true) deps.recorder.failed(backend);
          else if (result.status < 500 && result.streamError === undefined) deps.recorder.succeeded(backend);
          made.result = result;
          return made;
        } catch (err) {
          if (!(err instanceof AttemptFailure) || made.committed) throw err;
          lastFailure = err;
          exclude.add(backend.id);
          await attemptFailed(deps, request.sessionId, request.tier, backend, err.healthSignal);
          const cause = err.cause instanceof Error ? err.cause.message : undefined;
          deps.logger.warn(
            { reqId: ctx.requestId, backend: backend.id, err: err.message, cause },
            "attempt failed",
          );
        } finally {
          deps.slots.release(backend, request.flow);
          if (relays.made !== undefined) made.generatedEvents = relays.made.generatedEvents;
        }
      } finally {
        deps.scheduler.attemptEnded?.(selection);
      }
    }
    if (migration?.pending === true) {
      const why = lastFailure?.message ?? `no other healthy backend in tier '${request.tier}'`;
      made.result = giveUp(deps, migration, res, made, why, lastFailure);
      return made;
    }
    made.error = exhausted(request.tier, lastFailure, made.attempts);
  } catch (err) {
    // [continuation] An open stream (the deadline passed while it waited for the next engine) ends with its
    // error event, unless the client left.
    if (migration?.pending === true && !(err instanceof ClientClosedError)) {
      made.result = giveUp(deps, migration, res, made, err instanceof Error ? err.message : String(err), err);
      return made;
    }
    made.error = err;
  }
  return made;
}

/** [continuation] No engine could go on with an open stream: it ends with its API's error event. */
function giveUp(
  deps: Pick<AttemptLoopDeps, "recorder">,
  migration: StreamMigration,
  res: AnswerSink,
  made: AttemptsMade,
  why: string,
  err: unknown,
): AttemptResult {
  const code = err instanceof GatewayError ? err.code : "upstream_error";
  const message = migration.giveUpMessage(why);
  made.broken = { message, code, cause: undefined };
  made.migrated = migration.describe({ message, code, engineFault: true });
  deps.recorder.migration("failed");
  return migration.giveUp(res, message, code);
}

/**
 * The selection as its request leaves for the engine, its slot taken: where the placement recorded the prompt's
 * KV blocks, they count for others from now, and the prediction is made now (a request that waited for a slot
 * was not on its way meanwhile).
 */
function sentNow(selection: Selection<Backend>): Selection<Backend> | Promise<Selection<Backend>> {
  if (selection.send === undefined) return selection;
  const expected = selection.send();
  return expected instanceof Promise
    ? expected.then((tokens) => sentWith(selection, tokens))
    : sentWith(selection, expected);
}

function sentWith(selection: Selection<Backend>, expectedCachedTokens: number): Selection<Backend> {
  const { backend, affinityHit, reason, releaseKvPending } = selection;
  return { backend, affinityHit, reason, expectedCachedTokens, releaseKvPending };
}

/** The next backend to try, or undefined when no candidate is left. */
function placeNext(
  deps: AttemptLoopDeps,
  request: RoutedRequest,
  exclude: ReadonlySet<string>,
  binding: LookedUp | undefined,
): Placed<Backend> {
  const tierBackends = deps.registry.tier(request.tier);
  // The tier's Backends are the candidates: their in-flight and queued counts are kept by BackendSlots,
  // their engine readings by the load poller, so nothing is built per request.
  const candidates =
    request.onlyBackend === undefined
      ? tierBackends
      : tierBackends.filter((b) => b.id === request.onlyBackend);
  return deps.scheduler.place(
    request.sessionId,
    request.tier,
    candidates,
    exclude,
    request.placement,
    binding,
  );
}

/**
 * Takes a slot on `backend`: undefined when it was free (no promise), else the wait for it, which resolves
 * undefined with the slot held, or the failure when the backend went away meanwhile (try another). The wait is
 * added to `made` either way.
 */
function takeSlot(
  deps: AttemptLoopDeps,
  backend: Backend,
  abort: AttemptAbort,
  flow: FlowTicket | undefined,
  made: AttemptsMade,
): Promise<AttemptFailure | undefined> | undefined {
  const waitStartedMs = deps.clock.nowMs();
  const pending = deps.slots.acquire(backend, abort, flow);
  if (pending === undefined) {
    waited(deps, flow, made, deps.clock.nowMs() - waitStartedMs);
    return undefined;
  }
  return waitForSlot(deps, backend, pending, flow, made, waitStartedMs);
}

async function waitForSlot(
  deps: AttemptLoopDeps,
  backend: Backend,
  pending: Promise<void>,
  flow: FlowTicket | undefined,
  made: AttemptsMade,
  waitStartedMs: number,
): Promise<AttemptFailure | undefined> {
  try {
    await pending;
    return undefined;
  } catch (err) {
    if (!(err instanceof SlotUnavailableError)) throw err;
    return new AttemptFailure("upstream_error", `backend ${backend.id}: ${err.message}`, false);
  } finally {
    waited(deps, flow, made, deps.clock.nowMs() - waitStartedMs);
  }
}

function waited(
  deps: AttemptLoopDeps,
  flow: FlowTicket | undefined,
  made: AttemptsMade,
  waitedMs: number,
): void {
  made.queueWaitMs += waitedMs;
  if (flow !== undefined) deps.recorder.waited(flow.band, waitedMs / 1000);
}

/** What one attempt on the selected backend sends and how it reports back (made.committed, the relay). */
function planOf(
  deps: AttemptLoopDeps,
  request: RoutedRequest,
  ctx: CancellableRequest,
  selection: Selection<Backend>,
  abort: AttemptAbort,
  relays: RelayMaker,
  made: AttemptsMade,
  migration?: StreamMigration,
  continuing = false,
): AttemptPlan {
  const { backend } = selection;
  const { tier, sessionId } = request;
  made.committed = false;
  const firstBody = request.bodies.forModel(backend.model);
  // [continuation] A continuing attempt's receipt and reason say the answer moved.
  const reason = continuing ? "migrated" : selection.reason;
  return {
    backend,
    upstream: deps.pools.get(backend),
    method: "POST",
    path: migration === undefined ? request.path : migration.path(request.path),
    body: migration === undefined ? firstBody : migration.body(firstBody),
    stream: request.stream,
    meta: {
      session_id: sessionId ?? null,
      session_source: request.sessionSource ?? null,
      tier,
      tier_source: request.tierSource,
      backend_id: backend.id,
      affinity_hit: selection.affinityHit,
      reason: selection.reason,
      queue_wait_ms: Math.round(made.queueWaitMs),
      attempts: made.attempts,
      adapted: request.adaptation?.changes,
      receipt: undefined,
      migrated: migration?.fields,
    },
    requestId: ctx.requestId,
    abort,
    cancelled: () => ctx.cancelReason,
    startedAtMs: ctx.startedAtMs,
    createRelay: relays.for(backend.id),
    readResponseId: request.responses,
    restoreBody: relays.restoreBody,
    upstreamHeaders: withEngineSessionHeader(backend.upstreamHeaders, sessionId),
    receipt:
      request.receipt === undefined
        ? undefined
        : (usage, responseId) => {
            const expectedCachedTokens = selection.expectedCachedTokens;
            const placement = { backendId: backend.id, tier, reason, expectedCachedTokens };
            const receipt = request.receipt!.now(usage, placement, responseId);
            if (receipt?.expectedCachedTokens !== undefined)
              deps.recorder.kvPrediction(tier, receipt.expectedCachedTokens, usage);
            return receipt === undefined ? undefined : receiptFields(receipt);
          },
    onCommit: () => {
      made.committed = true;
    },
    onStreamError: (broken) => {
      made.broken = { message: broken.message, code: broken.code, cause: broken.cause };
      if (migration !== undefined) made.migrated = migration.describe(broken);
    },
    continuation: migration?.attempt(),
  };
}

/** The error when no attempt answered: the last failure's, or no backend at all. */
function exhausted(tier: string, lastFailure: AttemptFailure | undefined, attempts: number): GatewayError {
  if (lastFailure === undefined)
    return new GatewayError("no_healthy_backend", `no healthy backend in tier '${tier}'`, {
      retryAfterSeconds: 5,
    });
  // Every engine said it is overloaded and when to come back: a 503 that says so, not a 502.
  const retryAfterSeconds = lastFailure.retryAfterSeconds;
  return new GatewayError(
    lastFailure.code,
    `${lastFailure.message}; ${attempts} attempt(s) made`,
    retryAfterSeconds === undefined ? {} : { retryAfterSeconds, status: 503 },
  );
}

/**
 * Makes the relay of the request's event stream when a stream reaches the client (one per API), and keeps
 * the last one made: what it relayed is charged if the stream ends early. The seam where a stream's relay is
 * chosen: a relay that continues a broken stream elsewhere would be made here too.
 */
class RelayMaker {
  made: StreamRelay | undefined;
  readonly restoreBody: ((body: Buffer) => Buffer) | undefined;
  private readonly apiRelay: (member: Buffer, receipt?: StreamReceipt) => StreamRelay;

  constructor(
    request: RoutedRequest,
    /** [continuation] Records the first engine's stream and splices a continuing engine's into it. */
    private readonly migration: StreamMigration | undefined,
  ) {
    const restorer = request.adaptation?.restorer;
    this.restoreBody = restorer === undefined ? undefined : (body) => restorer.body(body);
    this.apiRelay = request.responses
      ? (member, receipt) => new ResponsesRelay(member, restorer, receipt)
      : request.messages
        ? (member, receipt) => new MessagesRelay(member, receipt)
        : (member, receipt) => new SseRelay(member, request.bodies.stripUsage, receipt);
  }

  /** The relay maker of an attempt on `backendId`. */
  for(backendId: string): (member: Buffer, receipt?: StreamReceipt) => StreamRelay {
    const { migration } = this;
    if (migration === undefined) return (member, receipt) => (this.made = this.apiRelay(member, receipt));
    return (member, receipt) =>
      (this.made = migration.relay(() => this.apiRelay(member, receipt), member, receipt, backendId));
  }
}

/**
 * A failed attempt's two consequences, in this order. The session's binding to the backend is broken first
 * (awaited); then the failure counts against the backend's health. recorder.failed() may mark the backend
 * down, and the registry tells its listeners synchronously, inside that call: the backend is retired (every
 * binding to it broken in the local view, see backend-changes.ts) before it returns. Breaking the session's
 * binding first means that retirement does not find it, so it is counted once (as this failure's), never
 * twice.
 */
async function attemptFailed(
  deps: Pick<AttemptLoopDeps, "scheduler" | "recorder">,
  sessionId: string | undefined,
  tier: string,
  backend: Backend,
  healthSignal: boolean,
): Promise<void> {
  await deps.scheduler.onAttemptFailed(sessionId, tier, backend.id);
  if (healthSignal) deps.recorder.failed(backend);
}
