import { createBalancer } from "../../src/affinity/balancers.js";
import { describe, expect, it } from "vitest";
import { MemoryBindingStore } from "../../src/affinity/memory-bindings.js";
import { PlacementService } from "../../src/affinity/placement-service.js";
import { StickyTable } from "../../src/affinity/sticky-table.js";
import { ManualClock } from "../../src/core/clock.js";
import { SeededRandom } from "../../src/core/random.js";
import {
  candidate,
  candidates,
  CountingRecorder,
  DEFAULT_LOAD_FACTOR,
  harness,
  sessionIds,
  TEST_HASH_KEY,
  type TestCandidate,
} from "./helpers.js";

const TTL_SECONDS = 1800;
const TTL_MS = TTL_SECONDS * 1000;

function settings(stickyTtlSeconds: number) {
  return {
    stickyTtlMs: stickyTtlSeconds * 1000,
    rebalanceOnRecovery: false,
    balancer: createBalancer("least_inflight", new SeededRandom(1)),
    loadFactor: DEFAULT_LOAD_FACTOR,
    sessionless: "prefix" as const,
  };
}

function find(list: readonly TestCandidate[], id: string): TestCandidate {
  const found = list.find((c) => c.id === id);
  if (found === undefined) throw new Error(`no candidate ${id}`);
  return found;
}

describe("PlacementService: a session's turns", () => {
  it("gives a 6-turn session exactly one miss (new_session) then five hits (affinity_hit) on one backend", async () => {
    const { scheduler, recorder } = harness();
    const list = candidates(3, "small");
    const turns = [];
    for (let turn = 0; turn < 6; turn++)
      turns.push((await scheduler.place("agent-session-1", "small", list))!);

    expect(turns.map((t) => t.reason)).toEqual([
      "new_session",
      "affinity_hit",
      "affinity_hit",
      "affinity_hit",
      "affinity_hit",
      "affinity_hit",
    ]);
    expect(turns.map((t) => t.affinityHit)).toEqual([false, true, true, true, true, true]);
    expect(new Set(turns.map((t) => t.backend.id)).size).toBe(1);
    expect(turns[0]!.backend.id).toBe(scheduler.ranking("agent-session-1", list)[0]!.id);
    expect(recorder.totals("small")).toEqual({ hits: 5, misses: 1, broken: 0 });
    expect(recorder.totals("big")).toEqual({ hits: 0, misses: 0, broken: 0 });
  });

  it("reproduces the load study: 12 sessions x 6 turns -> 60/72 hits (83.3%)", async () => {
    const { scheduler, recorder } = harness();
    const list = candidates(2, "small");
    const ids = sessionIds(12, 100);
    for (let turn = 0; turn < 6; turn++) for (const id of ids) await scheduler.place(id, "small", list);
    expect(recorder.totals("small")).toEqual({ hits: 60, misses: 12, broken: 0 });
  });

  it("reports no_session (a miss, nothing bound) when the request has no session id", async () => {
    const { scheduler, store, recorder } = harness();
    const list = [
      candidate("a", { inflight: 3 }),
      candidate("b", { inflight: 1 }),
      candidate("c", { inflight: 2 }),
    ];
    const selection = (await scheduler.place(undefined, "small", list))!;
    expect(selection).toMatchObject({ affinityHit: false, reason: "no_session" });
    expect(selection.backend.id).toBe("b"); // least in flight
    expect(store.size).toBe(0);
    expect(recorder.totals("small")).toEqual({ hits: 0, misses: 1, broken: 0 });
  });

  it("returns undefined and counts nothing when no candidate can take the request", async () => {
    const { scheduler, recorder } = harness();
    const down = [candidate("a", { state: "down" }), candidate("b", { state: "draining" })];
    expect(await scheduler.place("s", "small", down)).toBeUndefined();
    expect(await scheduler.place(undefined, "small", down)).toBeUndefined();
    expect(await scheduler.place("s", "small", [])).toBeUndefined();
    const list = candidates(2);
    expect(await scheduler.place("s", "small", list, new Set(["engine-0", "engine-1"]))).toBeUndefined();
    expect(recorder.totals("small")).toEqual({ hits: 0, misses: 0, broken: 0 });
  });

  it("rebinds a session whose binding names a backend of another tier (rebind_tier_changed)", async () => {
    const { scheduler, recorder } = harness();
    const small = candidates(2, "small");
    const big = candidates(2, "big");
    const first = (await scheduler.place("s", "small", small))!;
    const moved = (await scheduler.place("s", "big", big))!;
    expect(moved).toMatchObject({ affinityHit: false, reason: "rebind_tier_changed" });
    expect(moved.backend.id).toMatch(/^big-/);
    expect(await scheduler.boundBackend("s")).toBe(moved.backend.id);
    expect(first.backend.id).toMatch(/^small-/);
    expect(recorder.totals("big")).toEqual({ hits: 0, misses: 1, broken: 0 });
    expect((await scheduler.place("s", "big", big))!.reason).toBe("affinity_hit");
  });
});

describe("PlacementService: TTL on a manual clock", () => {
  it("expires a binding exactly TTL after its last use, and each hit refreshes the TTL", async () => {
    const { scheduler, clock, recorder } = harness({ ttlSeconds: TTL_SECONDS });
    const list = candidates(4);
    const first = (await scheduler.place("s", "small", list))!;
    expect(first.reason).toBe("new_session");

    // Hits just before expiry, each one pushing the expiry out: 3 x (TTL - 1 ms) is well past the first TTL.
    for (let i = 0; i < 3; i++) {
      clock.advance(TTL_MS - 1);
      expect(await scheduler.place("s", "small", list)).toMatchObject({
        reason: "affinity_hit",
        affinityHit: true,
      });
    }
    expect(await scheduler.boundBackend("s")).toBe(first.backend.id);

    clock.advance(TTL_MS); // exactly TTL without activity: lapsed
    expect(await scheduler.boundBackend("s")).toBeUndefined();
    const after = (await scheduler.place("s", "small", list))!;
    expect(after).toMatchObject({ reason: "rebind_expired", affinityHit: false });
    expect(after.backend.id).toBe(first.backend.id); // same HRW winner: the cache may still be there
    expect((await scheduler.place("s", "small", list))!.reason).toBe("affinity_hit");
    expect(recorder.totals("small")).toEqual({ hits: 4, misses: 2, broken: 0 });
  });

  it("applies a reloaded TTL to later bindings (configure)", async () => {
    const { scheduler, clock } = harness({ ttlSeconds: 60 });
    const list = candidates(2);
    await scheduler.place("s", "small", list);
    scheduler.configure(settings(10));
    // The existing binding keeps its 60 s expiry until used; the hit then refreshes it with the new 10 s.
    clock.advance(30_000);
    expect((await scheduler.place("s", "small", list))!.reason).toBe("affinity_hit");
    clock.advance(10_000);
    expect((await scheduler.place("s", "small", list))!.reason).toBe("rebind_expired");
    expect(scheduler.affinityEnabled).toBe(true);
    scheduler.configure(settings(0));
    expect(scheduler.affinityEnabled).toBe(false);
    expect((await scheduler.place("s", "small", list))!.reason).toBe("affinity_disabled");
    // Turning affinity off forgets the bindings: turning it back on starts from nothing.
    expect(scheduler.bindingsOf(list[0]!.id) + scheduler.bindingsOf(list[1]!.id)).toBe(0);
    scheduler.configure(settings(60));
    expect((await scheduler.place("s", "small", list))!.reason).toBe("new_session");
  });

  it("counts a binding broken when a retry excludes its backend without onAttemptFailed", async () => {
    const { scheduler, recorder } = harness();
    const list = candidates(3);
    const first = (await scheduler.place("r", "small", list))!;
    const retry = (await scheduler.place("r", "small", list, new Set([first.backend.id])))!;
    expect(retry.reason).toBe("failover");
    expect(retry.backend.id).not.toBe(first.backend.id);
    await scheduler.onAttemptFailed("r", "small", first.backend.id); // late: already counted, not again
    expect(recorder.totals("small").broken).toBe(1);
  });
});

describe("PlacementService: backend down", () => {
  async function boundPopulation(count: number) {
    const h = harness();
    const list = candidates(4);
    const ids = sessionIds(count, 500);
    const bound = new Map<string, string>();
    for (const id of ids) bound.set(id, (await h.scheduler.place(id, "small", list))!.backend.id);
    return { ...h, list, ids, bound };
  }

  it("onBackendDown removes exactly that backend's bindings, reports the count, and touches no other", async () => {
    const { scheduler, store, recorder, list, ids, bound } = await boundPopulation(2_000);
    const victim = "engine-1";
    const held = ids.filter((id) => bound.get(id) === victim);
    expect(held.length).toBeGreaterThan(400);
    const othersBefore = list.filter((c) => c.id !== victim).map((c) => store.countFor(c.id));

    find(list, victim).state = "down";
    expect(await scheduler.onBackendDown(victim, "small")).toBe(held.length);
    expect(recorder.brokenCalls).toEqual([{ tier: "small", count: held.length }]);
    expect(store.countFor(victim)).toBe(0);
    expect(list.filter((c) => c.id !== victim).map((c) => store.countFor(c.id))).toEqual(othersBefore);
    for (const id of held) expect(await scheduler.boundBackend(id)).toBeUndefined();

    // A second report of the same outage breaks nothing more.
    expect(await scheduler.onBackendDown(victim, "small")).toBe(0);
    expect(recorder.brokenCalls).toHaveLength(1);

    let rebound = 0;
    let hits = 0;
    for (const id of ids) {
      const selection = (await scheduler.place(id, "small", list))!;
      if (bound.get(id) === victim) {
        const expected = scheduler.ranking(id, list).find((c) => c.id !== victim)!.id;
        if (
          selection.reason === "rebind_backend_down" &&
          !selection.affinityHit &&
          selection.backend.id === expected
        )
          rebound++;
      } else if (selection.reason === "affinity_hit" && selection.backend.id === bound.get(id)) {
        hits++;
      }
    }
    expect(rebound).toBe(held.length);
    expect(hits).toBe(ids.length - held.length);
    expect(recorder.totals("small")).toEqual({
      hits: ids.length - held.length,
      misses: ids.length + held.length,
      broken: held.length,
    });
    // The rebound sessions hit on their new backend from then on.
    expect((await scheduler.place(held[0]!, "small", list))!.reason).toBe("affinity_hit");
  });

  it("does not count already-expired bindings as broken", async () => {
    const { scheduler, clock, recorder } = harness({ ttlSeconds: 10 });
    const list = [candidate("only")];
    await scheduler.place("old", "small", list);
    clock.advance(5_000);
    await scheduler.place("fresh", "small", list);
    clock.advance(5_000); // "old" lapsed at exactly 10 s; "fresh" has 5 s left
    expect(await scheduler.onBackendDown("only", "small")).toBe(1);
    expect(recorder.totals("small").broken).toBe(1);
  });

  it("counts a down pin found before the health event once, and the event then counts only the rest", async () => {
    const { scheduler, recorder, list, ids, bound } = await boundPopulation(400);
    const victim = "engine-2";
    const held = ids.filter((id) => bound.get(id) === victim);
    find(list, victim).state = "down";

    // The first affected session arrives before onBackendDown: it is rebound and counted as broken.
    const early = (await scheduler.place(held[0]!, "small", list))!;
    expect(early).toMatchObject({ reason: "rebind_backend_down", affinityHit: false });
    expect(recorder.totals("small").broken).toBe(1);

    expect(await scheduler.onBackendDown(victim, "small")).toBe(held.length - 1);
    expect(recorder.totals("small").broken).toBe(held.length); // = the bindings the engine held
  });
});

describe("PlacementService: failover after a failed attempt", () => {
  it("onAttemptFailed + exclude gives reason failover and the next backend of the ranking, broken once", async () => {
    const { scheduler, recorder } = harness();
    const list = candidates(5);
    const ranking = scheduler.ranking("s", list).map((c) => c.id);
    const first = (await scheduler.place("s", "small", list))!;
    expect(first.backend.id).toBe(ranking[0]);

    await scheduler.onAttemptFailed("s", "small", ranking[0]!);
    expect(recorder.totals("small").broken).toBe(1);
    const retry = (await scheduler.place("s", "small", list, new Set([ranking[0]!])))!;
    expect(retry).toMatchObject({ reason: "failover", affinityHit: false });
    expect(retry.backend.id).toBe(ranking[1]);
    expect(await scheduler.boundBackend("s")).toBe(ranking[1]);

    // The health checker then takes the engine down: the session already moved, so nothing more is broken.
    find(list, ranking[0]!).state = "down";
    expect(await scheduler.onBackendDown(ranking[0]!, "small")).toBe(0);
    expect(recorder.totals("small").broken).toBe(1);
    expect(recorder.brokenCalls).toEqual([{ tier: "small", count: 1 }]);

    // The next request stays on the failover backend, even once the first one is back.
    find(list, ranking[0]!).state = "up";
    expect(await scheduler.place("s", "small", list)).toMatchObject({ reason: "affinity_hit" });
    expect(await scheduler.boundBackend("s")).toBe(ranking[1]);
    expect(recorder.totals("small")).toEqual({ hits: 1, misses: 2, broken: 1 });
  });

  it("walks the ranking when several attempts fail", async () => {
    const { scheduler, recorder } = harness();
    const list = candidates(4);
    const ranking = scheduler.ranking("s", list).map((c) => c.id);
    await scheduler.place("s", "small", list);
    const exclude = new Set<string>();
    for (let attempt = 1; attempt < 4; attempt++) {
      const failed = ranking[attempt - 1]!;
      await scheduler.onAttemptFailed("s", "small", failed);
      exclude.add(failed);
      const retry = (await scheduler.place("s", "small", list, exclude))!;
      expect(retry.reason).toBe("failover");
      expect(retry.backend.id).toBe(ranking[attempt]);
    }
    expect(recorder.totals("small").broken).toBe(3);
  });

  it("ignores a failure on a backend the session is not bound to, and a request without session", async () => {
    const { scheduler, recorder } = harness();
    const list = candidates(3);
    const pinned = (await scheduler.place("s", "small", list))!.backend.id;
    const other = list.find((c) => c.id !== pinned)!.id;
    await scheduler.onAttemptFailed("s", "small", other);
    await scheduler.onAttemptFailed(undefined, "small", pinned);
    await scheduler.onAttemptFailed("unknown", "small", pinned);
    expect(recorder.totals("small").broken).toBe(0);
    expect(await scheduler.boundBackend("s")).toBe(pinned);
  });

  it("skips an excluded backend even if no failure was reported for it (no binding to it is reused)", async () => {
    const { scheduler } = harness();
    const list = candidates(3);
    const ranking = scheduler.ranking("s", list).map((c) => c.id);
    await scheduler.place("s", "small", list);
    const retry = (await scheduler.place("s", "small", list, new Set([ranking[0]!])))!;
    expect(retry.backend.id).toBe(ranking[1]);
    expect(retry.affinityHit).toBe(false);
  });
});

describe("PlacementService: draining", () => {
  it("keeps a draining backend's pinned sessions but gives it no new ones", async () => {
    const { scheduler, store, list, ids, bound } = await (async () => {
      const h = harness();
      const l = candidates(3);
      const i = sessionIds(600, 900);
      const b = new Map<string, string>();
      for (const id of i) b.set(id, (await h.scheduler.place(id, "small", l))!.backend.id);
      return { ...h, list: l, ids: i, bound: b };
    })();
    const drained = "engine-0";
    find(list, drained).state = "draining";
    const pinned = ids.filter((id) => bound.get(id) === drained);
    expect(pinned.length).toBeGreaterThan(100);

    let kept = 0;
    for (const id of pinned) {
      const selection = (await scheduler.place(id, "small", list))!;
      if (selection.reason === "affinity_hit" && selection.backend.id === drained) kept++;
    }
    expect(kept).toBe(pinned.length);
    expect(store.countFor(drained)).toBe(pinned.length);

    let placedOnDrained = 0;
    const fresh = sessionIds(3_000, 901);
    for (const id of fresh)
      if ((await scheduler.place(id, "small", list))!.backend.id === drained) placedOnDrained++;
    expect(placedOnDrained).toBe(0);
    expect(store.countFor(drained)).toBe(pinned.length);
  });
});

describe("PlacementService: backend recovery", () => {
  async function outageAndRecovery(rebalance: boolean) {
    const h = harness({ rebalance });
    const list = candidates(4);
    const ids = sessionIds(2_000, 1234);
    const original = new Map<string, string>();
    for (const id of ids) original.set(id, (await h.scheduler.place(id, "small", list))!.backend.id);
    const victim = find(list, "engine-3");
    victim.state = "down";
    await h.scheduler.onBackendDown(victim.id, "small");
    // During the outage, every session has one more turn (the victim's move), and new sessions arrive.
    for (const id of ids) await h.scheduler.place(id, "small", list);
    const duringOutage = sessionIds(500, 1235);
    for (const id of duringOutage) await h.scheduler.place(id, "small", list);
    victim.state = "up";
    const before = new Map<string, string | undefined>();
    for (const id of [...ids, ...duringOutage]) before.set(id, await h.scheduler.boundBackend(id));
    return { ...h, list, ids, original, victim, duringOutage, before };
  }

  it("with rebalance on, moves back exactly the sessions whose rendezvous winner is the recovered backend", async () => {
    const { scheduler, list, ids, original, victim, duringOutage, before } = await outageAndRecovery(true);
    const all = [...ids, ...duringOutage];
    const shouldMove = all.filter((id) => scheduler.ranking(id, list)[0]!.id === victim.id);
    // Those are the victim's original sessions plus the outage-time newcomers it would have won.
    expect(shouldMove.filter((id) => ids.includes(id)).sort()).toEqual(
      ids.filter((id) => original.get(id) === victim.id).sort(),
    );

    expect(await scheduler.onBackendUp(victim.id, list)).toBe(shouldMove.length);
    const moving = new Set(shouldMove);
    let wrong = 0;
    for (const id of all) {
      const now = await scheduler.boundBackend(id);
      if (moving.has(id) ? now !== victim.id : now !== before.get(id)) wrong++;
    }
    expect(wrong).toBe(0);
    expect(await scheduler.place(shouldMove[0]!, "small", list)).toMatchObject({
      backend: { id: victim.id },
      reason: "affinity_hit",
    });
  });

  it("with rebalance off (the default), moves none", async () => {
    const { scheduler, list, ids, victim, duringOutage, before } = await outageAndRecovery(false);
    expect(await scheduler.onBackendUp(victim.id, list)).toBe(0);
    let changed = 0;
    for (const id of [...ids, ...duringOutage])
      if ((await scheduler.boundBackend(id)) !== before.get(id)) changed++;
    expect(changed).toBe(0);
  });
});

describe("PlacementService: wiring", () => {
  it("works against any BindingStore and clock it is given", async () => {
    const store = new StickyTable(10, TEST_HASH_KEY);
    const clock = new ManualClock(0);
    const recorder = new CountingRecorder();
    const scheduler = new PlacementService({
      store: new MemoryBindingStore(store),
      clock,
      balancer: createBalancer("least_inflight", new SeededRandom(1)),
      recorder,
      stickyTtlMs: 1000,
      loadFactor: DEFAULT_LOAD_FACTOR,
      sessionless: "prefix",
    });
    const list = candidates(2);
    await scheduler.place("s", "t", list);
    expect(store.size).toBe(1);
    clock.advance(999);
    expect((await scheduler.place("s", "t", list))!.affinityHit).toBe(true);
    clock.advance(1000);
    expect((await scheduler.place("s", "t", list))!.reason).toBe("rebind_expired");
  });
});
