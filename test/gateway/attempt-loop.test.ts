// The attempt loop alone, driven with fakes through its small interfaces (placer, slots, recorder, attempt
// runner): no sockets, no engines, a manual clock.
import { describe, expect, it } from "vitest";
import type { Selection } from "../../src/affinity/decide.js";
import { gatewayTicket } from "../../src/admission/flow-queue/flow-ticket.js";
import { SlotUnavailableError } from "../../src/admission/backend-slots.js";
import { Backend } from "../../src/backends/backend.js";
import { ManualClock } from "../../src/core/clock.js";
import { GatewayError } from "../../src/core/errors.js";
import type { AnswerSink, AttemptEnv, AttemptPlan, AttemptResult } from "../../src/gateway/attempt.js";
import {
  runAttemptLoop,
  type AttemptLoopDeps,
  type AttemptRecorder,
  type CancellableRequest,
  type RoutedRequest,
} from "../../src/gateway/attempt-loop.js";
import { ClientClosedError } from "../../src/gateway/client-closed.js";
import { AttemptFailure } from "../../src/gateway/upstream-failure.js";

const THRESHOLDS = { failuresToMarkDown: 3, successesToMarkUp: 1 };

function backend(id: string): Backend {
  return new Backend(
    { id, tier: "small", base_url: `http://${id}.invalid`, model: "m", max_inflight: 4, weight: 1 },
    THRESHOLDS,
  );
}

/** What an attempt on each backend does: answer with a status, fail before the answer, or fail after it. */
type Script = Record<string, "answer" | "fail" | "overloaded" | "fail-after-commit">;

function setup(
  script: Script,
  options: {
    maxAttempts?: number;
    waitMs?: number;
    gone?: string;
    predicts?: number;
    /** The send is announced to other replicas first (a promise); `leave`: the client leaves meanwhile. */
    announced?: "settles" | "leave";
  } = {},
) {
  const clock = new ManualClock(1_000);
  const backends = Object.keys(script).map(backend);
  const events: string[] = [];
  const plans: AttemptPlan[] = [];
  const ended: string[] = [];
  const recorder: AttemptRecorder = {
    selection: (tier, reason) => events.push(`selection ${tier} ${reason}`),
    retry: (tier) => events.push(`retry ${tier}`),
    waited: (band, seconds) => events.push(`waited band ${band} ${seconds}s`),
    succeeded: (b) => events.push(`succeeded ${b.id}`),
    failed: (b) => events.push(`failed ${b.id}`),
    migration: (outcome) => events.push(`migration ${outcome}`),
    kvPrediction: (tier, expected) => events.push(`kv prediction ${tier} ${expected}`),
  };
  const deps: AttemptLoopDeps = {
    clock,
    logger: { warn: () => undefined },
    registry: { tier: () => backends },
    scheduler: {
      // The fake placer takes the candidates in order, skipping the excluded ones.
      place: (_session, _tier, candidates, exclude) => {
        const next = candidates.find((c) => !exclude?.has(c.id));
        // With `predicts`, the placement recorded the prompt's KV blocks: its send makes the prediction.
        const send =
          options.predicts === undefined || next === undefined
            ? undefined
            : () => {
                events.push(`sent ${next.id}`);
                if (options.announced === undefined) return options.predicts!;
                return Promise.resolve().then(() => {
                  if (options.announced === "leave")
                    ctx.cancelReason = new ClientClosedError("the client left");
                  events.push(`announced ${next.id}`);
                  return options.predicts!;
                });
              };
        const selection =
          next === undefined
            ? undefined
            : { backend: next, affinityHit: false, reason: exclude?.size ? "failover" : "new_session", send };
        return Promise.resolve(selection as Selection<(typeof candidates)[number]> | undefined);
      },
      onAttemptFailed: (_session, _tier, id) => {
        events.push(`binding broken ${id}`);
        return Promise.resolve();
      },
      attemptEnded: (selection) => void ended.push(selection.backend.id),
    },
    slots: {
      acquire: (b) => {
        events.push(`acquire ${b.id}`);
        if (b.id === options.gone) return Promise.reject(new SlotUnavailableError("backend marked down"));
        if (options.waitMs === undefined) return undefined;
        clock.advance(options.waitMs);
        return Promise.resolve();
      },
      release: (b) => void events.push(`release ${b.id}`),
    },
    pools: { get: () => ({ pool: undefined as never, basePath: "" }) },
    recorder,
    runAttempt: (_env: AttemptEnv, plan: AttemptPlan, _res: AnswerSink): Promise<AttemptResult> => {
      plans.push(plan);
      const id = plan.backend.id;
      switch (script[id]) {
        case "answer":
          plan.onCommit();
          return Promise.resolve({ status: 200 });
        case "fail":
          return Promise.reject(new AttemptFailure("upstream_error", `backend ${id} answered 500`, true));
        case "overloaded":
          return Promise.reject(new AttemptFailure("upstream_error", `backend ${id} answered 503`, true, 7));
        default:
          plan.onCommit();
          return Promise.reject(new AttemptFailure("upstream_error", `backend ${id} broke mid-stream`, true));
      }
    },
  };
  const limits = { settings: { maxAttempts: options.maxAttempts ?? 3 }, attemptEnv: {} as AttemptEnv };
  const request: RoutedRequest = {
    tier: "small",
    tierSource: "model",
    sessionId: "s-1",
    sessionSource: "header:x-session-id",
    path: "/v1/chat/completions",
    bodies: { forModel: () => Buffer.from("{}"), stripUsage: false },
    stream: false,
    responses: false,
    messages: false,
    onlyBackend: undefined,
    placement: { prefixKey: undefined },
    flow: gatewayTicket(1),
  };
  const ctx: CancellableRequest = { requestId: "r-1", startedAtMs: clock.nowMs() };
  const run = () => runAttemptLoop(deps, limits, request, {} as AnswerSink, ctx);
  return { run, events, plans, ctx, clock, ended };
}

describe("the attempt loop", () => {
  it("fails over from a failing engine to the next and returns what it did", async () => {
    const { run, events, plans } = setup({ a: "fail", b: "answer" });
    const made = await run();
    expect(made.result).toEqual({ status: 200 });
    expect(made.error).toBeUndefined();
    expect(made.attempts).toBe(2);
    expect(made.selection).toMatchObject({ backend: { id: "b" }, reason: "failover" });
    expect(events).toEqual([
      "selection small new_session",
      "acquire a",
      "waited band 1 0s",
      // The binding is broken before the failure counts against the engine's health (see attemptFailed).
      "binding broken a",
      "failed a",
      "release a",
      "selection small failover",
      "retry small",
      "acquire b",
      "waited band 1 0s",
      "succeeded b",
      "release b",
    ]);
    // Each attempt's metadata says which attempt it is.
    expect(plans.map((plan) => [plan.backend.id, plan.meta.attempts, plan.method])).toEqual([
      ["a", 1, "POST"],
      ["b", 2, "POST"],
    ]);
  });

  it("returns the last failure when every attempt failed, with the engines' Retry-After as a 503", async () => {
    const { run } = setup({ a: "overloaded", b: "overloaded" });
    const made = await run();
    expect(made.result).toBeUndefined();
    expect(made.attempts).toBe(2);
    expect(made.error).toBeInstanceOf(GatewayError);
    expect(made.error).toMatchObject({ code: "upstream_error", status: 503, retryAfterSeconds: 7 });
    expect((made.error as Error).message).toContain("2 attempt(s) made");
  });

  it("stops at max_attempts", async () => {
    const { run, plans } = setup({ a: "fail", b: "fail", c: "answer" }, { maxAttempts: 2 });
    const made = await run();
    expect(plans).toHaveLength(2);
    expect(made.error).toMatchObject({ code: "upstream_error" });
  });

  it("says no healthy backend when none could be placed", async () => {
    const { run } = setup({});
    const made = await run();
    expect(made.attempts).toBe(0);
    expect(made.error).toMatchObject({ code: "no_healthy_backend", retryAfterSeconds: 5 });
  });

  it("does not retry an attempt whose answer reached the client", async () => {
    const { run, plans } = setup({ a: "fail-after-commit", b: "answer" });
    const made = await run();
    expect(plans).toHaveLength(1);
    expect(made.error).toBeInstanceOf(AttemptFailure);
    expect(made.attempts).toBe(1);
  });

  it("ends every attempt's placement once, however it ended (its pending KV blocks are let go)", async () => {
    const failedOver = setup({ a: "fail", b: "answer" });
    await failedOver.run();
    expect(failedOver.ended).toEqual(["a", "b"]);
    const slotGone = setup({ a: "answer", b: "answer" }, { gone: "a" });
    await slotGone.run();
    expect(slotGone.ended).toEqual(["a", "b"]);
    const broken = setup({ a: "fail-after-commit" });
    await broken.run();
    expect(broken.ended).toEqual(["a"]);
    const cancelled = setup({ a: "answer" });
    cancelled.ctx.cancelReason = new GatewayError("upstream_timeout", "request deadline passed");
    await cancelled.run();
    expect(cancelled.ended).toEqual(["a"]);
  });

  it("tries the next engine when the one it waited for went away", async () => {
    const { run, plans, events } = setup({ a: "answer", b: "answer" }, { gone: "a" });
    const made = await run();
    expect(plans.map((plan) => plan.backend.id)).toEqual(["b"]);
    expect(made.attempts).toBe(2);
    expect(events).not.toContain("release a"); // no slot was taken there
  });

  it("returns the request's cancel reason, and registers each attempt for cancelling", async () => {
    const { run, ctx } = setup({ a: "answer" });
    const reason = new GatewayError("upstream_timeout", "request deadline passed");
    ctx.cancelReason = reason;
    const made = await run();
    expect(made.error).toBe(reason);
    expect(ctx.activeAttempt).toBeDefined();
  });

  it("sends a placement's KV blocks once its slot is taken, and predicts then", async () => {
    const { run, events } = setup({ a: "answer" }, { waitMs: 250, predicts: 64 });
    const made = await run();
    expect(events.slice(1, 4)).toEqual(["acquire a", "waited band 1 0.25s", "sent a"]);
    expect(made.selection).toMatchObject({ backend: { id: "a" }, expectedCachedTokens: 64 });
    // A slot that went away sends nothing there.
    const gone = setup({ a: "answer", b: "answer" }, { gone: "a", predicts: 64 });
    await gone.run();
    expect(gone.events.filter((e) => e.startsWith("sent"))).toEqual(["sent b"]);
  });

  it("awaits a send announced to the other replicas, and calls no engine if the client left meanwhile", async () => {
    const announced = setup({ a: "answer" }, { predicts: 64, announced: "settles" });
    const made = await announced.run();
    expect(made.selection).toMatchObject({ backend: { id: "a" }, expectedCachedTokens: 64 });
    expect(announced.plans).toHaveLength(1);
    const left = setup({ a: "answer" }, { predicts: 64, announced: "leave" });
    const abandoned = await left.run();
    expect(abandoned.error).toMatchObject({ code: "client_closed" });
    expect(left.plans).toHaveLength(0); // no engine was called
    expect(left.events.slice(-2)).toEqual(["announced a", "release a"]); // its slot given back
    expect(left.ended).toEqual(["a"]); // its pending KV blocks let go
  });

  it("adds up the time waited for slots on its clock", async () => {
    const { run, events } = setup({ a: "fail", b: "answer" }, { waitMs: 250 });
    const made = await run();
    expect(made.queueWaitMs).toBe(500);
    expect(events.filter((e) => e.startsWith("waited"))).toEqual([
      "waited band 1 0.25s",
      "waited band 1 0.25s",
    ]);
  });
});
