// The fair flow policy: the shared policy contract, and round-robin between flows.
import { describe, expect, it } from "vitest";
import { FairPolicy } from "../../../src/admission/flow-queue/fair-policy.js";
import { policyContract, type Item } from "./policy.case.js";

policyContract("fair", () => new FairPolicy<Item>());

describe("FairPolicy", () => {
  it("takes one request per flow per round, so a burst does not run ahead of a single turn", () => {
    const policy = new FairPolicy<Item>();
    const flows = ["burst", "burst", "burst", "burst", "one"];
    flows.forEach((flow, seq) => policy.push({ flow, band: 0, seq, id: seq }));
    expect(policy.last()!.flow).toBe("burst");
    expect(flows.map(() => policy.take(() => true)!.flow)).toEqual([
      "burst",
      "one",
      "burst",
      "burst",
      "burst",
    ]);
  });

  it("skips a flow with nothing eligible without losing its place", () => {
    const policy = new FairPolicy<Item>();
    ["a", "b", "c"].forEach((flow, seq) => policy.push({ flow, band: 0, seq, id: seq }));
    expect(policy.take((i) => i.flow !== "a")!.flow).toBe("b");
    expect(policy.take(() => true)!.flow).toBe("a");
  });
});
