// The fifo flow policy: the shared policy contract, and arrival order whoever asks.
import { describe, expect, it } from "vitest";
import { FifoPolicy } from "../../../src/admission/flow-queue/fifo-policy.js";
import { policyContract, type Item } from "./policy.case.js";

policyContract("fifo", () => new FifoPolicy<Item>());

describe("FifoPolicy", () => {
  it("serves in arrival order across flows and sheds the newest", () => {
    const policy = new FifoPolicy<Item>();
    const flows = ["a", "a", "a", "b"];
    flows.forEach((flow, seq) => policy.push({ flow, band: 0, seq, id: seq }));
    expect(policy.last()!.id).toBe(3);
    expect([0, 1, 2, 3].map(() => policy.take(() => true)!.flow)).toEqual(["a", "a", "a", "b"]);
  });
});
