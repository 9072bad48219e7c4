import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hashString } from "../../src/affinity/hash.js";
import { hashSession, rendezvousRanking, rendezvousWinner } from "../../src/affinity/rendezvous.js";
import { candidate, candidates, harness, sessionIds, type TestCandidate } from "./helpers.js";

const always = () => true;

function winnerId(sessionId: string, list: readonly TestCandidate[]): string {
  const winner = rendezvousWinner(hashSession(sessionId), list, always);
  if (winner === undefined) throw new Error("no winner");
  return winner.id;
}

function shares(ids: readonly string[], list: readonly TestCandidate[]): Map<string, number> {
  const counts = new Map<string, number>(list.map((c) => [c.id, 0]));
  for (const id of ids) {
    const w = winnerId(id, list);
    counts.set(w, counts.get(w)! + 1);
  }
  return counts;
}

/** Distinct backend ids (1..24 of them) and a session id. */
const backendIdsArb = fc.uniqueArray(fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,15}$/), {
  minLength: 1,
  maxLength: 24,
});
const sessionArb = fc.string({ minLength: 1, maxLength: 80 });

describe("rendezvous ranking", () => {
  it("ranks the backends the same way every time for the same session, whatever the input order", () => {
    fc.assert(
      fc.property(sessionArb, backendIdsArb, fc.nat(), (sessionId, ids, rotation) => {
        const list = ids.map((id) => candidate(id));
        const first = rendezvousRanking(hashSession(sessionId), list).map((c) => c.id);
        const again = rendezvousRanking(hashString(sessionId), list).map((c) => c.id);
        const shift = rotation % list.length;
        const rotated = [...list.slice(shift), ...list.slice(0, shift)].reverse();
        const reordered = rendezvousRanking(hashSession(sessionId), rotated).map((c) => c.id);
        expect(again).toEqual(first);
        expect(reordered).toEqual(first);
        expect([...first].sort()).toEqual([...ids].sort());
      }),
      { seed: 42, numRuns: 300 },
    );
  });

  it("has the winner at ranking[0], and the first eligible entry of the ranking as the filtered winner", () => {
    fc.assert(
      fc.property(
        sessionArb,
        backendIdsArb,
        fc.array(fc.boolean(), { maxLength: 24 }),
        (sessionId, ids, mask) => {
          const list = ids.map((id) => candidate(id));
          const eligibleIds = new Set(ids.filter((_, i) => mask[i] ?? true));
          const session = hashSession(sessionId);
          const ranking = rendezvousRanking(session, list);
          expect(rendezvousWinner(session, list, always)?.id).toBe(ranking[0]?.id);
          const filtered = rendezvousWinner(session, list, (c) => eligibleIds.has(c.id));
          expect(filtered?.id).toBe(ranking.find((c) => eligibleIds.has(c.id))?.id);
        },
      ),
      { seed: 42, numRuns: 300 },
    );
  });

  it("returns undefined when no candidate is eligible", () => {
    expect(rendezvousWinner(hashSession("s"), candidates(4), () => false)).toBeUndefined();
    expect(rendezvousWinner(hashSession("s"), [], always)).toBeUndefined();
    expect(rendezvousRanking(hashSession("s"), [])).toEqual([]);
  });
});

describe("rendezvous balance", () => {
  it("gives each of 16 backends within +/-5% of the mean over 100,000 random sessions (via the scheduler)", async () => {
    const { scheduler, recorder } = harness({ maxBindings: 200_000 });
    const list = candidates(16);
    const counts = new Map<string, number>(list.map((c) => [c.id, 0]));
    let otherReasons = 0;
    for (const id of sessionIds(100_000, 42)) {
      const selection = (await scheduler.place(id, "small", list))!;
      if (selection.reason !== "new_session") otherReasons++;
      counts.set(selection.backend.id, counts.get(selection.backend.id)! + 1);
    }
    expect(otherReasons).toBe(0);
    const mean = 100_000 / 16;
    for (const [id, count] of counts) {
      expect(Math.abs(count - mean), `${id} got ${count}`).toBeLessThanOrEqual(mean * 0.05);
    }
    expect(recorder.totals("small").misses).toBe(100_000);
  });

  it("balances structured ids too (sequential numbers sharing a long prefix)", () => {
    const list = candidates(16);
    const ids = Array.from(
      { length: 50_000 },
      (_, i) => `agent-run-2024-session-${String(i).padStart(8, "0")}`,
    );
    const mean = ids.length / 16;
    for (const count of shares(ids, list).values())
      expect(Math.abs(count - mean)).toBeLessThanOrEqual(mean * 0.05);
  });

  it("skews shares in proportion to weight (2 vs 1 -> about 2x)", () => {
    const list = [candidate("heavy", { weight: 2 }), candidate("light-a"), candidate("light-b")];
    const counts = shares(sessionIds(60_000, 8), list);
    const heavy = counts.get("heavy")!;
    const lightA = counts.get("light-a")!;
    const lightB = counts.get("light-b")!;
    // Expected 30,000 / 15,000 / 15,000.
    expect(Math.abs(heavy - 30_000)).toBeLessThan(30_000 * 0.03);
    expect(heavy / lightA).toBeGreaterThan(1.9);
    expect(heavy / lightA).toBeLessThan(2.1);
    expect(heavy / lightB).toBeGreaterThan(1.9);
    expect(heavy / lightB).toBeLessThan(2.1);
  });

  it("gives a backend of weight w a share of w / (w + 1) against one of weight 1", () => {
    const ids = sessionIds(20_000, 12);
    for (const weight of [0.5, 3, 5]) {
      const counts = shares(ids, [candidate("w", { weight }), candidate("one")]);
      const share = counts.get("w")! / ids.length;
      expect(Math.abs(share - weight / (weight + 1))).toBeLessThan(0.015);
    }
  });
});

describe("rendezvous stability under membership changes", () => {
  it("removing one of N backends changes only the sessions that were on it", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 2, max: 20 }),
        fc.nat(),
        fc.array(sessionArb, { minLength: 50, maxLength: 200 }),
        (n, removedAt, sessions) => {
          const list = candidates(n);
          const removed = list[removedAt % n]!;
          const rest = list.filter((c) => c !== removed);
          for (const sessionId of sessions) {
            const before = winnerId(sessionId, list);
            const after = winnerId(sessionId, rest);
            if (before !== removed.id) expect(after).toBe(before);
            else expect(after).not.toBe(removed.id);
          }
        },
      ),
      { seed: 42, numRuns: 100 },
    );
  });

  it("removing one of 16 moves exactly its ~1/16 share, spread over the rest", () => {
    const list = candidates(16);
    const rest = list.slice(1);
    const ids = sessionIds(50_000, 21);
    let moved = 0;
    let movedFromSurvivor = 0;
    const landed = new Map<string, number>();
    for (const id of ids) {
      const before = winnerId(id, list);
      const after = winnerId(id, rest);
      if (before !== after) {
        moved++;
        if (before !== "engine-0") movedFromSurvivor++;
        landed.set(after, (landed.get(after) ?? 0) + 1);
      }
    }
    expect(movedFromSurvivor).toBe(0);
    expect(Math.abs(moved / ids.length - 1 / 16)).toBeLessThan(0.005);
    // The orphans spread over all 15 survivors, not onto one neighbour.
    expect(landed.size).toBe(15);
    for (const count of landed.values()) expect(count).toBeGreaterThan((moved / 15) * 0.75);
  });

  it("adding a backend to N moves about 1/(N+1) of new-session choices, all of them to the new backend", () => {
    const ids = sessionIds(40_000, 31);
    for (const n of [3, 8, 16]) {
      const list = candidates(n);
      const grown = [...list, candidate("added")];
      let moved = 0;
      let movedElsewhere = 0;
      for (const id of ids) {
        const before = winnerId(id, list);
        const after = winnerId(id, grown);
        if (after !== before) {
          moved++;
          if (after !== "added") movedElsewhere++;
        }
      }
      expect(movedElsewhere, `n=${n}`).toBe(0);
      const expected = 1 / (n + 1);
      expect(Math.abs(moved / ids.length - expected), `n=${n}`).toBeLessThan(expected * 0.08);
    }
  });

  it("adding a backend moves no bound session: the sticky table keeps them where their cache is", async () => {
    const { scheduler, recorder } = harness();
    const list = candidates(8);
    const ids = sessionIds(5_000, 77);
    const firstTurn = new Map<string, string>();
    for (const id of ids) firstTurn.set(id, (await scheduler.place(id, "small", list))!.backend.id);

    const grown = [...list, candidate("added")];
    let stayed = 0;
    for (const id of ids) {
      const selection = (await scheduler.place(id, "small", grown))!;
      if (selection.reason === "affinity_hit" && selection.backend.id === firstTurn.get(id)) stayed++;
    }
    expect(stayed).toBe(ids.length);
    expect(recorder.totals("small")).toEqual({ hits: 5_000, misses: 5_000, broken: 0 });

    // New sessions, though, do use the added backend, for about 1/9 of them.
    let onAdded = 0;
    const fresh = sessionIds(9_000, 78).filter((id) => !firstTurn.has(id));
    for (const id of fresh)
      if ((await scheduler.place(id, "small", grown))!.backend.id === "added") onAdded++;
    expect(Math.abs(onAdded / fresh.length - 1 / 9)).toBeLessThan(0.015);
  });
});
