// The balancers that place requests when affinity does not decide: least in-flight, round-robin, random.
import { describe, expect, it } from "vitest";
import { createBalancer, type BalancedCandidate } from "../../src/affinity/balancers.js";
import { SeededRandom } from "../../src/core/random.js";

const backends = (inflight: number[]): BalancedCandidate[] =>
  inflight.map((n, i) => ({ id: `b${i}`, inflight: n }));
const all = (): boolean => true;

describe("balancers", () => {
  it("least_inflight picks the least loaded and spreads ties evenly with the seeded source", () => {
    const balancer = createBalancer("least_inflight", new SeededRandom(3));
    expect(balancer.pick("t", backends([3, 1, 2]), all)?.id).toBe("b1");
    const counts = new Map<string, number>();
    for (let i = 0; i < 3000; i++) {
      const id = balancer.pick("t", backends([0, 0, 0, 5]), all)!.id;
      counts.set(id, (counts.get(id) ?? 0) + 1);
    }
    expect(counts.has("b3")).toBe(false);
    for (const id of ["b0", "b1", "b2"]) expect(counts.get(id)!).toBeGreaterThan(900);
  });

  it("round_robin cycles per tier and skips ineligible backends", () => {
    const balancer = createBalancer("round_robin", new SeededRandom(1));
    const list = backends([0, 0, 0]);
    const notB1 = (c: BalancedCandidate): boolean => c.id !== "b1";
    expect([0, 1, 2, 3].map(() => balancer.pick("a", list, notB1)!.id)).toEqual(["b0", "b2", "b0", "b2"]);
    expect(balancer.pick("other-tier", list, all)!.id).toBe("b0");
  });

  it("random is uniform over eligible backends and deterministic for a seed", () => {
    const pickMany = (seed: number): string[] => {
      const balancer = createBalancer("random", new SeededRandom(seed));
      return Array.from({ length: 3000 }, () => balancer.pick("t", backends([9, 0, 0]), all)!.id);
    };
    const picks = pickMany(11);
    expect(pickMany(11)).toEqual(picks);
    for (const id of ["b0", "b1", "b2"]) expect(picks.filter((p) => p === id).length).toBeGreaterThan(900);
  });

  it("returns undefined when nothing is eligible", () => {
    for (const name of ["least_inflight", "round_robin", "random"] as const) {
      expect(
        createBalancer(name, new SeededRandom(1)).pick("t", backends([0, 0]), () => false),
      ).toBeUndefined();
    }
  });
});
