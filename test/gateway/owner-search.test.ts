// The owner search alone, driven with a fake attempt runner and manual timers (no sockets): a miss of the owner
// store asks every engine that is not down, through the attempt path's plan, and stops at the first 200 or at
// its timeout.
import { describe, expect, it } from "vitest";
import { ResponseOwners } from "../../src/affinity/response-owners.js";
import { Backend } from "../../src/backends/backend.js";
import { ManualClock, ManualTimers } from "../../src/core/clock.js";
import { GatewayError } from "../../src/core/errors.js";
import { stopReasonError } from "../../src/gateway/attempt-abort.js";
import type { AnswerSink, AttemptEnv, AttemptPlan, AttemptResult } from "../../src/gateway/attempt.js";
import { SearchingOwnerStore } from "../../src/gateway/owner-search.js";

const TIMEOUT_MS = 2_000;

/** What each engine does when asked: it stores the response (200), does not (404), or never answers. */
type Script = Record<string, "stores" | "not" | "hangs" | "down">;

function setup(script: Script) {
  const clock = new ManualClock(1_000);
  const timers = new ManualTimers(clock);
  const backends = Object.entries(script).map(([id, does]) => {
    const backend = new Backend(
      { id, tier: "small", base_url: `http://${id}.invalid`, model: "m", max_inflight: 4, weight: 1 },
      { failuresToMarkDown: 3, successesToMarkUp: 1 },
    );
    backend.awaitingFirstProbe = does === "down";
    return backend;
  });
  const plans: AttemptPlan[] = [];
  const runAttempt = (_env: AttemptEnv, plan: AttemptPlan, res: AnswerSink): Promise<AttemptResult> => {
    plans.push(plan);
    const does = script[plan.backend.id];
    if (does === "hangs") {
      return new Promise((_resolve, reject) =>
        plan.abort.listen((why) => reject(plan.cancelled() ?? stopReasonError(why))),
      );
    }
    const status = does === "stores" ? 200 : 404;
    res.writeHead(status, []);
    res.end(Buffer.from("{}"));
    return Promise.resolve({ status });
  };
  const owners = new SearchingOwnerStore(new ResponseOwners(clock, { ttlMs: 60_000, maxEntries: 100 }), {
    registry: { all: () => backends.values() },
    pools: { get: () => ({ pool: undefined as never, basePath: "" }) },
    attemptEnv: () => ({ nowMs: () => clock.nowMs() }) as AttemptEnv,
    timeoutMs: () => TIMEOUT_MS,
    timers,
    runAttempt,
  });
  return { owners, plans, timers };
}

describe("the owner search", () => {
  it("asks every engine that is not down through the attempt path and remembers the one that answers 200", async () => {
    const { owners, plans, timers } = setup({ e0: "not", e1: "down", e2: "stores" });
    expect(await owners.owner("resp/1")).toEqual({ backendId: "e2", sessionKey: "response-chain:resp/1" });
    expect(plans.map((p) => p.backend.id)).toEqual(["e0", "e2"]);
    for (const plan of plans) {
      expect(plan).toMatchObject({
        method: "GET",
        path: "/v1/responses/resp%2F1",
        relayAsIs: true,
        stream: false,
      });
    }
    expect(owners.searches).toEqual({ asked: 1, found: 1 });
    expect(timers.size).toBe(0); // its timeout cancelled

    // Remembered: the next read is a hit, and asks no engine.
    expect(await owners.owner("resp/1")).toMatchObject({ backendId: "e2" });
    expect(plans).toHaveLength(2);
  });

  it("stops the asks still going once one engine answered", async () => {
    const { owners, plans } = setup({ slow: "hangs", e1: "stores" });
    expect(await owners.owner("r")).toMatchObject({ backendId: "e1" });
    const slow = plans.find((p) => p.backend.id === "slow")!;
    expect(slow.abort.reason).toBeInstanceOf(GatewayError);
  });

  it("gives up at its timeout, on the injected timers: a miss stays a miss", async () => {
    const { owners, plans, timers } = setup({ slow: "hangs", e1: "not" });
    const found = owners.owner("r");
    expect(timers.nextDueMs()).toBe(1_000 + TIMEOUT_MS);
    const slow = plans.find((p) => p.backend.id === "slow")!;
    timers.advance(TIMEOUT_MS - 1);
    expect(slow.abort.reason).toBeUndefined();
    timers.advance(1);
    expect(slow.abort.reason).toMatchObject({ code: "upstream_timeout" });
    expect(await found).toBeUndefined();
    expect(owners.searches).toEqual({ asked: 1, found: 0 });
  });

  it("asks nothing when every engine is down", async () => {
    const { owners, plans, timers } = setup({ e0: "down" });
    expect(await owners.owner("r")).toBeUndefined();
    expect(plans).toHaveLength(0);
    expect(owners.searches.asked).toBe(0);
    expect(timers.size).toBe(0);
  });
});
