// Placement by engines' KV events (src/affinity/kv-placement.ts) through the pure decision: the cheapest engine
// (prompt left to compute plus work ahead) for requests without a session and sessions being placed, the move
// rule for bound sessions, spills only where they cost less than waiting at home.
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
  activeTokens: Record<string, number> = {},
  promptTokens?: number,
  roomTokens?: Record<string, number>,
  opensConversation?: boolean,
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
    activeWork: new Map(Object.entries(activeTokens)),
    promptTokens,
    roomTokens: roomTokens === undefined ? undefined : new Map(Object.entries(roomTokens)),
    opensConversation,
  });
}

describe("placement by KV events", () => {
  it("a request without a session goes to the longest cached prefix", () => {
    const list = candidates(3);
    const decision = decide(undefined, list, { "engine-0": 160, "engine-1": 4000, "engine-2": 0 }, null);
    expect(decision.selection).toMatchObject({ backend: { id: "engine-1" }, reason: "kv_prefix" });
    expect(decision.effects).toEqual([]);
  });

  it("...unless the prefill work ahead there outweighs what it holds", () => {
    const list = candidates(3);
    const active = { "engine-0": 0, "engine-1": 3_000, "engine-2": 0 };
    // Cost = work ahead - 2 x held (score-kv-cost.ts). engine-1: 3000 - 8000 = -5000 beats engine-0's -320.
    expect(
      decide(undefined, list, { "engine-0": 160, "engine-1": 4000, "engine-2": 0 }, null, active).selection,
    ).toMatchObject({ backend: { id: "engine-1" } });
    // engine-1: 8000 - 8000 = 0 loses to engine-0's -320.
    expect(
      decide(undefined, list, { "engine-0": 160, "engine-1": 4000, "engine-2": 0 }, null, {
        ...active,
        "engine-1": 8_000,
      }).selection,
    ).toMatchObject({ backend: { id: "engine-0" }, reason: "kv_prefix" });
  });

  it("weighs work, not request counts: a conversation stays with its cache on an engine running more short calls", () => {
    const list = [candidate("engine-0", { inflight: 6 }), candidate("engine-1"), candidate("engine-2")];
    // The load bound (1.25 x 7 / 3 = 3) would have sent it away; 6 short calls are 600 tokens of prefill.
    const decision = decide(
      undefined,
      list,
      { "engine-0": 150_000, "engine-1": 20_000, "engine-2": 20_000 },
      null,
      { "engine-0": 600 },
    );
    expect(decision.selection).toMatchObject({ backend: { id: "engine-0" }, reason: "kv_prefix" });
  });

  it("a new conversation keeps to the load bound: a shared prefix does not pull it onto a loaded engine", () => {
    const list = [candidate("engine-0", { inflight: 6 }), candidate("engine-1"), candidate("engine-2")];
    const shared = { "engine-0": 20_000, "engine-1": 0, "engine-2": 0 };
    // engine-0's cost (0 - 2 x 20,000) is the lowest, but it is past the bound (1.25 x 7 / 3 = 3).
    for (const sessionId of [null, "s-new"]) {
      const decision = decide(undefined, list, shared, sessionId, {}, 100_000);
      expect(decision.selection?.backend.id).not.toBe("engine-0");
    }
    // Its own conversation (most of the prompt) keeps it there, load or not.
    const own = { "engine-0": 90_000, "engine-1": 20_000, "engine-2": 0 };
    expect(decide(undefined, list, own, null, {}, 100_000).selection).toMatchObject({
      backend: { id: "engine-0" },
      reason: "kv_prefix",
    });
  });

  it("a prompt that opens a conversation keeps to the bound even where the shared opening is most of it", () => {
    const list = [candidate("engine-0", { inflight: 6 }), candidate("engine-1"), candidate("engine-2")];
    // A sub-agent's first call: 6,000 tokens of instructions its siblings share (held by engine-0), 150 its own.
    const instructions = { "engine-0": 6_000, "engine-1": 0, "engine-2": 0 };
    for (const sessionId of [null, "s-sub"]) {
      const opening = decide(undefined, list, instructions, sessionId, {}, 6_150, undefined, true);
      expect(opening.selection?.backend.id).not.toBe("engine-0");
    }
    // The same tokens held of a prompt that continues a conversation: its engine keeps it, past the bound.
    expect(decide(undefined, list, instructions, null, {}, 6_150, undefined, false).selection).toMatchObject({
      backend: { id: "engine-0" },
    });
  });

  it("adds the other replicas' requests to the bound on up engines only, the engines the tier's load counts", () => {
    const list = [
      candidate("engine-0", { inflight: 2 }),
      candidate("engine-1", { inflight: 1 }),
      candidate("engine-2"),
      candidate("engine-3", { state: "down" }),
    ];
    const place = (otherReplicasLoad: Map<string, number>) =>
      decidePlacement(settings(), {
        sessionId: undefined,
        tier: "small",
        candidates: list,
        exclude: new Set(),
        hints: { prefixKey: undefined },
        binding: undefined,
        nowMs: NOW_MS,
        cachedTokens: new Map([["engine-0", 6_000]]),
        activeWork: new Map(),
        promptTokens: 6_150,
        opensConversation: true,
        otherReplicasLoad,
      }).selection?.backend.id;
    // Up load 3 of 3 engines: bound ceil(1.25 x 4 / 3) = 2, so engine-0 (2 in flight) is full however much it holds.
    // Six requests of other replicas still counted on engine-3, which went down, would lift the bound to 5.
    expect(place(new Map([["engine-3", 6]]))).not.toBe("engine-0");
    // The same six on an up engine are load the bound must count: engine-0 fits under ceil(1.25 x 10 / 3) = 5.
    expect(place(new Map([["engine-2", 6]]))).toBe("engine-0");
  });

  it("a new conversation counts what it would evict: a shared prefix does not pull it onto a full engine", () => {
    // The kvevents study's quick plan: engine-0 holds the 2,000-token shared system prompt and three sessions,
    // room for 3,800 more tokens; the others are empty. Cost there: 0 - 2 x 2,000 + (10,723 - 2,000 - 3,800
    // evicted) = 923, above the empty engines' 0.
    const list = candidates(3);
    const shared = { "engine-0": 2_000, "engine-1": 0, "engine-2": 0 };
    const full = { "engine-0": 3_800, "engine-1": 32_768, "engine-2": 32_768 };
    for (const sessionId of [null, "s-new"]) {
      const decision = decide(undefined, list, shared, sessionId, {}, 10_723, full);
      expect(decision.selection?.backend.id).not.toBe("engine-0");
    }
    // With room for its prefill it evicts nothing, and the shared prefix wins.
    const roomy = { "engine-0": 9_000, "engine-1": 32_768, "engine-2": 32_768 };
    expect(decide(undefined, list, shared, null, {}, 10_723, roomy).selection).toMatchObject({
      backend: { id: "engine-0" },
    });
    // A continued conversation (half its prompt held on engine-0) is ranked by what it holds alone: -10,800 vs
    // engine-1's -10,000 (counting evictions, engine-0 would cost -10,800 + 5,323 and lose).
    const own = { "engine-0": 5_400, "engine-1": 5_000, "engine-2": 0 };
    const noRoom = { "engine-0": 0, "engine-1": 32_768, "engine-2": 32_768 };
    expect(decide(undefined, list, own, null, {}, 10_723, noRoom).selection).toMatchObject({
      backend: { id: "engine-0" },
      reason: "kv_prefix",
    });
  });

  it("spreads requests over engines holding the same prefix: the least work first, then the fewest requests", () => {
    const list = [
      candidate("engine-0", { inflight: 1 }),
      candidate("engine-1", { inflight: 2 }),
      candidate("engine-2"),
    ];
    const held = { "engine-0": 20_000, "engine-1": 20_000, "engine-2": 20_000 };
    expect(
      decide(undefined, list, held, null, { "engine-0": 90_000, "engine-1": 0, "engine-2": 500 }).selection,
    ).toMatchObject({ backend: { id: "engine-1" } });
    // Equal work: the fewest requests in flight and queued.
    expect(decide(undefined, list, held, null, {}).selection).toMatchObject({ backend: { id: "engine-2" } });
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

  it("a spill goes to the cheapest free engine, binding kept", () => {
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

  it("...but a full home that costs less than any free engine keeps the session: it waits where its cache is", () => {
    const list = [candidate("engine-0", { inflight: 64 }), candidate("engine-1"), candidate("engine-2")];
    const decision = decide(
      "engine-0",
      list,
      { "engine-0": 90_000, "engine-1": 20_000, "engine-2": 0 },
      "s-1",
      {
        "engine-0": 8_000,
      },
    );
    expect(decision.selection).toMatchObject({ backend: { id: "engine-0" }, reason: "affinity_hit" });
  });

  it("a bound session does not move for load alone, nor to a holder that costs more", () => {
    const list = candidates(3);
    // engine-1 is idle but holds less: no move, however busy engine-0 is.
    const idle = decide("engine-0", list, { "engine-0": 90_000, "engine-1": 20_000 }, "s-1", {
      "engine-0": 500_000,
    });
    expect(idle.selection).toMatchObject({ backend: { id: "engine-0" }, reason: "affinity_hit" });
    // engine-1 holds 2000 more but has 10,000 tokens of work ahead.
    const busy = decide("engine-0", list, { "engine-0": 0, "engine-1": 2_000 }, "s-1", {
      "engine-1": 10_000,
    });
    expect(busy.selection).toMatchObject({ backend: { id: "engine-0" }, reason: "affinity_hit" });
  });

  it("a new session goes to the cheapest engine; among equal ones, to its rendezvous order", () => {
    const list = candidates(3);
    const ranking = rendezvousRanking(hashSession("s-1"), list).map((c) => c.id);
    const [winner, second] = [ranking[0]!, ranking[1]!];
    const holds = decide(undefined, list, { [winner]: 0, [second]: 16 });
    expect(holds.selection).toMatchObject({ backend: { id: second }, reason: "new_session" });
    // Every engine holds the shared system prompt: work ahead decides, then the session's ranking.
    const shared = { "engine-0": 20_000, "engine-1": 20_000, "engine-2": 20_000 };
    expect(decide(undefined, list, shared).selection).toMatchObject({ backend: { id: winner } });
    expect(decide(undefined, list, shared, "s-1", { [winner]: 30_000 }).selection).toMatchObject({
      backend: { id: second },
    });
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
