// Placement by engines' KV events (src/affinity/kv-placement.ts) through the pure decision: the longest cached
// prefix for requests without a session, the move rule for bound sessions, spills to the best holder.
import { describe, expect, it } from "vitest";
import { createBalancer } from "../../src/affinity/balancers.js";
import type { BindingLookup } from "../../src/affinity/binding-store.js";
import { decidePlacement, type PlacementSettings } from "../../src/affinity/decide.js";
import { hashSession, rendezvousRanking } from "../../src/affinity/rendezvous.js";
import { SeededRandom } from "../../src/core/random.js";
import { candidate, candidates, type TestCandidate } from "./helpers.js";

const NOW_MS = 5_000;

function settings(overrides: Partial<PlacementSettings> = {}): PlacementSettings {
  return {
    ttlMs: 60_000,
    loadFactor: 1.25,
    sessionless: "prefix",
    balancer: createBalancer("least_inflight", new SeededRandom(1)),
    policy: undefined,
    engineSignalMaxAgeMs: Infinity,
    kvMoveMinTokens: 1000,
    ...overrides,
  };
}

function decide(
  binding: BindingLookup,
  list: readonly TestCandidate[],
  cachedTokens: Record<string, number> | undefined,
  sessionId: string | null = "s-1",
) {
  return decidePlacement(settings(), {
    sessionId: sessionId ?? undefined,
    tier: "small",
    candidates: list,
    exclude: new Set(),
    hints: { prefixKey: undefined },
    binding,
    nowMs: NOW_MS,
    cachedTokens: cachedTokens === undefined ? undefined : new Map(Object.entries(cachedTokens)),
  });
}

describe("placement by KV events", () => {
  it("a request without a session goes to the longest cached prefix", () => {
    const list = candidates(3);
    const decision = decide(undefined, list, { "engine-0": 160, "engine-1": 4000, "engine-2": 0 }, null);
    expect(decision.selection).toMatchObject({ backend: { id: "engine-1" }, reason: "kv_prefix" });
    expect(decision.effects).toEqual([]);
  });

  it("...but not past the load bound", () => {
    const list = [candidate("engine-0"), candidate("engine-1", { inflight: 30 }), candidate("engine-2")];
    const decision = decide(undefined, list, { "engine-0": 160, "engine-1": 4000, "engine-2": 0 }, null);
    expect(decision.selection).toMatchObject({ backend: { id: "engine-0" }, reason: "kv_prefix" });
  });

  it("a bound session stays when no engine holds move_min_tokens more than its own", () => {
    const list = candidates(3);
    const decision = decide("engine-0", list, { "engine-0": 0, "engine-1": 999, "engine-2": 0 });
    expect(decision.selection).toMatchObject({ backend: { id: "engine-0" }, reason: "affinity_hit" });
  });

  it("a bound session whose engine evicted it moves to the engine holding it, and the binding with it", () => {
    const list = candidates(3);
    const decision = decide("engine-0", list, { "engine-0": 0, "engine-1": 1000, "engine-2": 200 });
    expect(decision.selection).toMatchObject({ backend: { id: "engine-1" }, reason: "kv_moved" });
    expect(decision.effects).toEqual([
      expect.objectContaining({ kind: "bind", sessionId: "s-1", backendId: "engine-1" }),
    ]);
  });

  it("a spill goes to the free engine holding most of the prompt, binding kept", () => {
    const list = [
      candidate("engine-0", { inflight: 64 }),
      candidate("engine-1"),
      candidate("engine-2"),
      candidate("engine-3"),
    ];
    // engine-3 holds a little more than engine-0 (the full home), under the move threshold of engine-0's: a spill.
    const decision = decide("engine-0", list, {
      "engine-0": 500,
      "engine-1": 0,
      "engine-2": 0,
      "engine-3": 600,
    });
    expect(decision.selection).toMatchObject({ backend: { id: "engine-3" }, reason: "spill" });
    expect(decision.effects).toEqual([expect.objectContaining({ kind: "refresh" })]);
  });

  it("a new session keeps its rendezvous winner unless another holds move_min_tokens more", () => {
    const list = candidates(3);
    const winner = rendezvousRanking(hashSession("s-1"), list)[0]!.id;
    const other = list.find((c) => c.id !== winner)!.id;
    const near = decide(undefined, list, { [winner]: 0, [other]: 999 });
    expect(near.selection).toMatchObject({ backend: { id: winner }, reason: "new_session" });
    const far = decide(undefined, list, { [winner]: 0, [other]: 1000 });
    expect(far.selection).toMatchObject({ backend: { id: other }, reason: "new_session" });
  });

  it("places exactly as without events when nobody holds any of the prompt", () => {
    const list = candidates(3);
    for (const binding of [undefined, "engine-2"] as const) {
      const without = decide(binding, list, undefined);
      const withNothing = decide(binding, list, { "engine-0": 0, "engine-1": 0, "engine-2": 0 });
      expect(withNothing).toEqual(without);
    }
  });
});
