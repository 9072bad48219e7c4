import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hashString, pairUniform } from "../../src/affinity/hash.js";
import { rendezvousScore } from "../../src/affinity/rendezvous.js";
import { candidate, sessionIds } from "./helpers.js";

/** The rendezvous score of one (session, backend) pair, as the scheduler computes it. */
function score(sessionId: string, backendId: string): number {
  return rendezvousScore(hashString(sessionId), candidate(backendId));
}

function popcount32(x: number): number {
  let v = x >>> 0;
  let n = 0;
  while (v !== 0) {
    v &= v - 1;
    n++;
  }
  return n;
}

describe("hashString", () => {
  it("is deterministic and returns two unsigned 32-bit lanes", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 300 }), (text) => {
        const a = hashString(text);
        const b = hashString(text.slice()); // same content, possibly another string object
        expect(a).toEqual(b);
        for (const lane of [a.hi, a.lo]) {
          expect(Number.isInteger(lane)).toBe(true);
          expect(lane).toBeGreaterThanOrEqual(0);
          expect(lane).toBeLessThan(2 ** 32);
        }
      }),
      { seed: 42, numRuns: 500 },
    );
  });

  it("gives 50,000 UUID-like session ids 50,000 distinct 64-bit hashes", () => {
    const seen = new Set<string>();
    for (const id of sessionIds(50_000, 3)) {
      const h = hashString(id);
      seen.add(`${h.hi}:${h.lo}`);
    }
    expect(seen.size).toBe(50_000);
  });

  it("avalanches: one changed character flips about half of the 64 bits", () => {
    const ids = sessionIds(2_000, 11);
    let flipped = 0;
    for (const id of ids) {
      const changed = id.slice(0, 20) + (id[20] === "a" ? "b" : "a") + id.slice(21);
      const a = hashString(id);
      const b = hashString(changed);
      flipped += popcount32(a.hi ^ b.hi) + popcount32(a.lo ^ b.lo);
    }
    const mean = flipped / ids.length;
    expect(mean).toBeGreaterThan(30);
    expect(mean).toBeLessThan(34);
  });
});

describe("pairUniform", () => {
  it("stays strictly inside (0, 1), so the log-based score is finite and positive", () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 64 }),
        fc.string({ minLength: 1, maxLength: 64 }),
        (session, backend) => {
          const u = pairUniform(hashString(session), hashString(backend));
          expect(u).toBeGreaterThan(0);
          expect(u).toBeLessThan(1);
          const s = score(session, backend);
          expect(Number.isFinite(s)).toBe(true);
          expect(s).toBeGreaterThan(0);
        },
      ),
      { seed: 42, numRuns: 1_000 },
    );
  });

  it("handles the extreme lanes (all zeros, all ones) without reaching 0 or 1", () => {
    for (const hi of [0, 0xffffffff]) {
      for (const lo of [0, 0xffffffff]) {
        const u = pairUniform({ hi, lo }, { hi: lo, lo: hi });
        expect(u).toBeGreaterThan(0);
        expect(u).toBeLessThan(1);
      }
    }
  });

  it("is uniform: 64,000 draws spread evenly over 16 buckets", () => {
    const backend = hashString("engine-0");
    const buckets = new Array<number>(16).fill(0);
    for (const id of sessionIds(64_000, 5)) {
      const u = pairUniform(hashString(id), backend);
      buckets[Math.floor(u * 16)]!++;
    }
    for (const count of buckets) expect(Math.abs(count - 4000)).toBeLessThan(4000 * 0.06);
  });
});

describe("the separator between session and backend ids", () => {
  it('scores ("ab", "c") and ("a", "bc") differently', () => {
    expect(score("ab", "c")).not.toBe(score("a", "bc"));
    expect(score("session-1", "0")).not.toBe(score("session-", "10"));
    expect(score("", "abc")).not.toBe(score("abc", ""));
  });

  it("never makes a concatenation-equal split score the same (1,000 random splits)", () => {
    let equal = 0;
    fc.assert(
      fc.property(
        fc.string({ maxLength: 20 }),
        fc.string({ minLength: 1, maxLength: 20 }),
        fc.string({ minLength: 1, maxLength: 20 }),
        (a, b, c) => {
          // session a+b with backend c, against session a with backend b+c: same concatenation.
          if (score(a + b, c) === score(a, b + c)) equal++;
        },
      ),
      { seed: 42, numRuns: 1_000 },
    );
    expect(equal).toBe(0);
  });

  it("does not let a split change the winner systematically: the two splits agree only by chance", () => {
    // If the split were ignored, "a|bc" and "ab|c" would always rank backends alike. Over 2,000 ids, the
    // winner among 4 backends should agree about 1/4 of the time, not always.
    const backends = ["0", "1", "2", "3"];
    let agree = 0;
    const ids = sessionIds(2_000, 9);
    for (const id of ids) {
      const winner = (session: string, suffix: string) =>
        backends.reduce((best, b) => (score(session, suffix + b) > score(session, suffix + best) ? b : best));
      if (winner(id + "x", "") === winner(id, "x")) agree++;
    }
    expect(agree / ids.length).toBeGreaterThan(0.2);
    expect(agree / ids.length).toBeLessThan(0.3);
  });
});
