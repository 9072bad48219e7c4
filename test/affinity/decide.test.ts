// The placement decision alone: what it returns for each kind of lookup, with no store, clock or recorder.
import { describe, expect, it } from "vitest";
import { createBalancer } from "../../src/affinity/balancers.js";
import { BROKEN, EXPIRED, type BindingLookup } from "../../src/affinity/binding-store.js";
import { decidePlacement, usesBinding, type PlacementSettings } from "../../src/affinity/decide.js";
import { hashSession, rendezvousRanking } from "../../src/affinity/rendezvous.js";
import { SeededRandom } from "../../src/core/random.js";
import { candidates, type TestCandidate } from "./helpers.js";

const NOW_MS = 5_000;
const TTL_MS = 60_000;

function settings(overrides: Partial<PlacementSettings> = {}): PlacementSettings {
  return {
    ttlMs: TTL_MS,
    loadFactor: 1.25,
    sessionless: "prefix",
    balancer: createBalancer("least_inflight", new SeededRandom(1)),
    policy: undefined,
    engineSignalMaxAgeMs: Infinity,
    ...overrides,
  };
}

function decide(
  binding: BindingLookup,
  list: readonly TestCandidate[],
  options: { exclude?: string[]; settings?: PlacementSettings; sessionId?: string | undefined } = {},
) {
  const sessionId = "sessionId" in options ? options.sessionId : "s-1";
  return decidePlacement(options.settings ?? settings(), {
    sessionId,
    tier: "small",
    candidates: list,
    exclude: new Set(options.exclude ?? []),
    hints: { prefixKey: undefined },
    binding,
    nowMs: NOW_MS,
  });
}

describe("decidePlacement", () => {
  it("a live binding to an up backend: that backend, a hit, one refresh", () => {
    const list = candidates(3);
    const decision = decide("engine-1", list);
    expect(decision.selection).toMatchObject({
      backend: { id: "engine-1" },
      affinityHit: true,
      reason: "affinity_hit",
    });
    expect(decision.outcome).toBe("hit");
    expect(decision.effects).toEqual([{ kind: "refresh", sessionId: "s-1", expiresAtMs: NOW_MS + TTL_MS }]);
  });

  it("no binding: the rendezvous winner, bound until now + TTL", () => {
    const list = candidates(3);
    const winner = rendezvousRanking(hashSession("s-1"), list)[0]!;
    const decision = decide(undefined, list);
    expect(decision.selection).toMatchObject({ backend: { id: winner.id }, reason: "new_session" });
    expect(decision.outcome).toBe("miss");
    expect(decision.effects).toEqual([
      {
        kind: "bind",
        sessionId: "s-1",
        placement: hashSession("s-1"),
        backendId: winner.id,
        expiresAtMs: NOW_MS + TTL_MS,
      },
    ]);
  });

  it("says why it rebinds: expired, broken, another tier's backend", () => {
    const list = candidates(3);
    expect(decide(EXPIRED, list).selection?.reason).toBe("rebind_expired");
    expect(decide(BROKEN, list).selection?.reason).toBe("rebind_backend_down");
    expect(decide("big-0", list).selection?.reason).toBe("rebind_tier_changed");
  });

  it("a binding to a backend that is down: breaks it (labelled with the tier), then binds elsewhere", () => {
    const list = candidates(3);
    list[1]!.state = "down";
    const decision = decide("engine-1", list);
    expect(decision.selection?.reason).toBe("rebind_backend_down");
    expect(decision.effects[0]).toEqual({
      kind: "break",
      sessionId: "s-1",
      backendId: "engine-1",
      tier: "small",
    });
    expect(decision.effects[1]).toMatchObject({ kind: "bind", sessionId: "s-1" });
    expect(decision.selection!.backend.id).not.toBe("engine-1");
  });

  it("a binding to a backend this request already failed on: failover, the break still named", () => {
    const decision = decide("engine-1", candidates(3), { exclude: ["engine-1"] });
    expect(decision.selection?.reason).toBe("failover");
    expect(decision.effects.map((e) => e.kind)).toEqual(["break", "bind"]);
  });

  it("the pinned backend full while another has room: a spill, the binding only refreshed", () => {
    const list = candidates(3);
    list[1]!.maxInflight = 1;
    list[1]!.inflight = 1;
    const decision = decide("engine-1", list);
    expect(decision.outcome).toBe("spill");
    expect(decision.selection?.reason).toBe("spill");
    expect(decision.selection!.backend.id).not.toBe("engine-1");
    expect(decision.effects.map((e) => e.kind)).toEqual(["refresh"]);
  });

  it("no backend can take it: no selection, but a break it found is still an effect", () => {
    const list = candidates(2);
    for (const c of list) c.state = "down";
    const decision = decide("engine-0", list);
    expect(decision.selection).toBeUndefined();
    expect(decision.effects.map((e) => e.kind)).toEqual(["break"]);
  });

  it("reads no binding without a session id or with affinity off, and names no effects", () => {
    const list = candidates(3);
    expect(usesBinding(settings(), undefined)).toBe(false);
    expect(usesBinding(settings({ ttlMs: 0 }), "s-1")).toBe(false);
    const off = decide("engine-2", list, { settings: settings({ ttlMs: 0 }) });
    expect(off).toMatchObject({ selection: { reason: "affinity_disabled" }, effects: [], outcome: "miss" });
    const none = decide(undefined, list, {
      sessionId: undefined,
      settings: settings({ sessionless: "balancer" }),
    });
    expect(none).toMatchObject({ selection: { reason: "no_session" }, effects: [] });
  });

  it("is pure: the same input twice gives the same decision, and the candidates are not touched", () => {
    const list = candidates(4);
    const before = JSON.stringify(list);
    expect(decide(BROKEN, list)).toEqual(decide(BROKEN, list));
    expect(JSON.stringify(list)).toBe(before);
  });
});
