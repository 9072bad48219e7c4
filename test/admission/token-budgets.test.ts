// Per-agent token budgets over a sliding window, on explicit timestamps (no clock, no timers).
import { describe, expect, it } from "vitest";
import { TokenBudgets } from "../../src/admission/token-budgets.js";

const HOUR_MS = 3_600_000;

function budgets(overrides: Record<string, number> = {}, maxAgents = 100) {
  return new TokenBudgets({
    windowMs: HOUR_MS,
    defaultBudget: 1000,
    overrides: new Map(Object.entries(overrides)),
    maxAgents,
  });
}

describe("TokenBudgets", () => {
  it("admits while usage is under the budget and refuses once it is spent", () => {
    const b = budgets();
    expect(b.check("a", 0)).toEqual({ allowed: true });
    b.charge("a", 600, 0);
    expect(b.check("a", 1000)).toEqual({ allowed: true });
    b.charge("a", 400, 1000);
    const refused = b.check("a", 2000);
    expect(refused).toMatchObject({ allowed: false, used: 1000, budget: 1000 });
    expect(b.check("other", 2000)).toEqual({ allowed: true });
  });

  it("returns budget as the window slides, and Retry-After says when enough of it is back", () => {
    const b = budgets();
    b.charge("a", 700, 0); // bucket of [0, 5 min)
    b.charge("a", 400, 20 * 60_000); // bucket of [20, 25 min)
    const refused = b.check("a", 30 * 60_000);
    expect(refused.allowed).toBe(false);
    // The first bucket leaves the window 60 min after it began: 30 minutes from now.
    if (!refused.allowed) expect(refused.retryAfterSeconds).toBe(30 * 60);
    expect(b.used("a", HOUR_MS - 1)).toBe(1100);
    expect(b.used("a", HOUR_MS)).toBe(400);
    expect(b.check("a", HOUR_MS)).toEqual({ allowed: true });
    expect(b.used("a", 20 * 60_000 + HOUR_MS)).toBe(0);
  });

  it("gives Retry-After of the oldest bucket that must expire, not the first one", () => {
    const b = budgets();
    b.charge("a", 100, 0);
    b.charge("a", 950, 10 * 60_000);
    const refused = b.check("a", 15 * 60_000);
    // Dropping the first 100 leaves 950 < 1000: the bucket starting at 0 expires at 60 min.
    if (refused.allowed) throw new Error("expected a refusal");
    expect(refused.retryAfterSeconds).toBe(45 * 60);
    b.charge("a", 100, 15 * 60_000); // 1150 now: both old buckets must go (the second ends at 70 min)
    const later = b.check("a", 15 * 60_000);
    if (later.allowed) throw new Error("expected a refusal");
    expect(later.retryAfterSeconds).toBe(55 * 60);
  });

  it("applies per-agent overrides", () => {
    const b = budgets({ big: 5000, tiny: 10 });
    b.charge("big", 4000, 0);
    b.charge("tiny", 10, 0);
    expect(b.check("big", 1).allowed).toBe(true);
    expect(b.check("tiny", 1).allowed).toBe(false);
    expect(b.budgetOf("someone")).toBe(1000);
  });

  it("remembers at most maxAgents agents (least recently seen forgotten first)", () => {
    const b = budgets({}, 50);
    for (let i = 0; i < 10_000; i++) b.charge(`agent-${i}`, 1, i);
    expect(b.agentCount).toBe(50);
    expect(b.used("agent-9999", 10_000)).toBe(1);
    expect(b.used("agent-0", 10_000)).toBe(0);
  });

  it("ignores non-positive or non-finite charges", () => {
    const b = budgets();
    b.charge("a", 0, 0);
    b.charge("a", -5, 0);
    b.charge("a", Number.NaN, 0);
    expect(b.used("a", 1)).toBe(0);
    expect(b.agentCount).toBe(0);
  });

  it("reserves for requests in flight, clamps to what is left, settles to real usage", () => {
    const b = budgets();
    const first = b.reserveNow("a", 600, 10, 0);
    expect(first).toMatchObject({ allowed: true, granted: 600 });
    const second = b.reserveNow("a", 600, 10, 0);
    expect(second).toMatchObject({ allowed: true, granted: 400 }); // clamped to what the first left
    const third = b.reserveNow("a", 600, 10, 0);
    expect(third).toMatchObject({ allowed: false, reason: "budget", retryAfterSeconds: 1 });
    expect(b.check("a", 0).allowed).toBe(false);
    if (!first.allowed || !second.allowed) throw new Error("expected holds");
    b.settle(first.reservation, 100, 0); // used less than held: the rest returns
    b.settle(second.reservation, 0, 0); // failed: released
    expect(b.used("a", 0)).toBe(100);
    expect(b.reserved("a")).toBe(0);
    expect(b.reserveNow("a", 2000, 10, 0)).toMatchObject({ allowed: true, granted: 900 });
  });

  it("a full table refuses a newcomer unless its least recent agent has nothing in the window", () => {
    const b = budgets({}, 2);
    b.charge("x", 5, 0);
    b.charge("y", 5, 0);
    expect(b.reserveNow("z", 10, 1, 1)).toMatchObject({ allowed: false, reason: "table_full" });
    expect(b.used("x", 1)).toBe(5);
    // After the window, x's usage is gone: it may be forgotten for the newcomer.
    expect(b.reserveNow("z", 10, 1, HOUR_MS + 1)).toMatchObject({ allowed: true });
    expect(b.agentCount).toBe(2);
  });

  it("keyed agents have a table of their own and are never evicted", () => {
    const b = budgets({}, 2);
    const held = b.reserveNow("key-agent", 1000, 1, 0, true);
    if (!held.allowed) throw new Error("expected a hold");
    b.settle(held.reservation, 1000, 0);
    for (let i = 0; i < 50; i++) b.charge(`anon-${i}`, 1, 0);
    for (let i = 0; i < 50; i++) b.reserveNow(`late-${i}`, 1, 1, HOUR_MS - 1);
    expect(b.used("key-agent", 1)).toBe(1000);
    expect(b.reserveNow("key-agent", 10, 1, 1, true)).toMatchObject({ allowed: false, reason: "budget" });
  });
});
