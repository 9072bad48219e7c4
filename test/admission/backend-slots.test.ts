// max_inflight slots and their queue, with the attempt aborts that withdraw a waiting request.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { BackendSlots, SlotUnavailableError } from "../../src/admission/backend-slots.js";
import { AttainedService } from "../../src/admission/flow-queue/attained-service.js";
import type { FlowTicket } from "../../src/admission/flow-queue/flow-ticket.js";
import { ManualClock } from "../../src/core/clock.js";
import { GatewayError } from "../../src/core/errors.js";
import { AttemptAbort } from "../../src/gateway/attempt-abort.js";

/** Slots over one backend of max_inflight 1 whose slot is already taken: the next acquire waits. */
function busyBackend(maxQueueSize = 10): {
  slots: BackendSlots;
  b: { id: string; maxInflight: number; inflight: number; queued: number };
} {
  const slots = new BackendSlots({ maxQueueSize, queueTimeoutMs: 1000 });
  const b = { id: "e0", maxInflight: 1, inflight: 0, queued: 0 };
  expect(slots.acquire(b)).toBeUndefined();
  return { slots, b };
}

/** Settles a promise into a value for assertions ("pending" when it has not settled yet). */
async function state(promise: Promise<void>): Promise<string | Error> {
  return Promise.race([
    promise.then(
      () => "granted",
      (err: unknown) => err as Error,
    ),
    new Promise<string>((resolve) => setImmediate(() => resolve("pending"))),
  ]);
}

describe("BackendSlots", () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] }));
  afterEach(() => vi.useRealTimers());

  it("grants a free slot at once and queues beyond max_inflight, first come first served", async () => {
    const { slots, b } = busyBackend();
    const first = slots.acquire(b)!;
    const second = slots.acquire(b)!;
    expect(slots.depth).toBe(2);
    slots.release(b);
    expect(await state(first)).toBe("granted");
    expect(await state(second)).toBe("pending");
    expect(b.inflight).toBe(1);
  });

  it("an aborted waiter leaves the queue with the abort's reason and never takes a slot", async () => {
    const { slots, b } = busyBackend();
    const abort = new AttemptAbort();
    const withdrawn = slots.acquire(b, abort)!;
    const next = slots.acquire(b)!;
    const reason = new Error("client closed the connection");
    abort.abort(reason);
    expect(await state(withdrawn)).toBe(reason);
    expect(slots.depth).toBe(1);
    slots.release(b);
    expect(await state(next)).toBe("granted");
    expect(b.inflight).toBe(1);
  });

  it("stops listening once the slot is granted: a later abort is the attempt's business", async () => {
    const { slots, b } = busyBackend();
    const abort = new AttemptAbort();
    const waiting = slots.acquire(b, abort)!;
    slots.release(b);
    expect(await state(waiting)).toBe("granted");
    abort.abort("backend marked down");
    expect(slots.depth).toBe(0);
    expect(b.inflight).toBe(1);
  });

  it("refuses when the queue is full, times out waiters, and fails waiters over when the backend goes", async () => {
    const { slots, b } = busyBackend(2);
    const timedOut = slots.acquire(b)!;
    vi.advanceTimersByTime(500);
    const failedOver = slots.acquire(b)!;
    const full = await state(slots.acquire(b)!);
    expect(full).toBeInstanceOf(GatewayError);
    expect((full as GatewayError).code).toBe("queue_full");
    vi.advanceTimersByTime(500);
    const timeout = await state(timedOut);
    expect((timeout as GatewayError).code).toBe("queue_timeout");
    slots.rejectWaiters(b.id, "backend marked down");
    expect(await state(failedOver)).toBeInstanceOf(SlotUnavailableError);
    expect(slots.depth).toBe(0);
  });
});

describe("AttemptAbort", () => {
  it("tells its current listener once, with the first reason as an Error, and keeps that reason", () => {
    const abort = new AttemptAbort();
    const heard: unknown[] = [];
    abort.listen(() => heard.push("replaced"));
    abort.listen((why) => heard.push(why.message));
    expect(abort.reason).toBeUndefined();
    abort.abort("first_byte_timeout");
    abort.abort("backend marked down");
    expect(heard).toEqual(["first_byte_timeout"]);
    expect(abort.reason).toBe("first_byte_timeout");
  });

  it("tells nobody once the listener is withdrawn", () => {
    const abort = new AttemptAbort();
    const heard: unknown[] = [];
    abort.listen((why) => heard.push(why.message));
    abort.listen(undefined);
    abort.abort(new Error("gone"));
    expect(heard).toEqual([]);
    expect(abort.reason).toBeInstanceOf(Error);
  });
});

describe("BackendSlots with flow tickets", () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] }));
  afterEach(() => vi.useRealTimers());

  const ticket = (flow: string, band = 0, estimatedTokens = 100): FlowTicket => ({
    flow,
    band,
    capped: true,
    weight: 1,
    estimatedTokens,
    chargedTokens: 0,
  });

  it("hands a freed slot to the least-served flow, charges the estimate at start and corrects it at the end", async () => {
    const service = new AttainedService({ halfLifeMs: 60_000, maxFlows: 10 }, new ManualClock());
    const slots = new BackendSlots({ maxQueueSize: 10, queueTimeoutMs: 1000, bands: 2 }, service);
    const b = { id: "e0", maxInflight: 1, inflight: 0, queued: 0 };
    const first = ticket("batch");
    expect(slots.acquire(b, undefined, first)).toBeUndefined();
    expect(service.value("batch")).toBe(100);
    const burst = slots.acquire(b, undefined, ticket("batch"))!;
    const turn = slots.acquire(b, undefined, ticket("interactive"))!;
    slots.release(b, first);
    slots.charge(first, 40);
    expect(service.value("batch")).toBe(40);
    expect(await state(turn)).toBe("granted");
    expect(await state(burst)).toBe("pending");
    expect(slots.waitingIn(0)).toBe(1);
  });

  it("sheds the lowest band's waiter for a higher newcomer: that waiter gets 503 queue_full", async () => {
    const slots = new BackendSlots({ maxQueueSize: 1, queueTimeoutMs: 1000, bands: 2 });
    const b = { id: "e0", maxInflight: 1, inflight: 0, queued: 0 };
    expect(slots.acquire(b, undefined, ticket("x"))).toBeUndefined();
    const low = slots.acquire(b, undefined, ticket("batch", 0))!;
    const high = slots.acquire(b, undefined, ticket("interactive", 1))!;
    const shed = await state(low);
    expect((shed as GatewayError).code).toBe("queue_full");
    expect(await state(high)).toBe("pending");
    expect(slots.depth).toBe(1);
  });
});
