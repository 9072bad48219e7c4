// The least-attained flow policy: the shared policy contract, and service-ordered flows with a half-life.
import { describe, expect, it } from "vitest";
import { LeastAttainedPolicy } from "../../../src/admission/flow-queue/least-attained-policy.js";
import { ManualClock } from "../../../src/core/clock.js";
import { newService, policyContract, type Item } from "./policy.case.js";

policyContract("least-attained", (service) => new LeastAttainedPolicy<Item>(service));

describe("LeastAttainedPolicy", () => {
  it("serves the flow served least lately first, and sheds the most-served flow's newest request", () => {
    const clock = new ManualClock();
    const service = newService(clock);
    const policy = new LeastAttainedPolicy<Item>(service);
    service.charge("heavy", 10_000);
    service.charge("light", 500);
    ["heavy", "heavy", "light", "new"].forEach((flow, seq) => policy.push({ flow, band: 0, seq, id: seq }));
    expect(policy.last()!.id).toBe(1);
    expect(policy.take(() => true)!.flow).toBe("new");
    expect(policy.take(() => true)!.flow).toBe("light");
    expect(policy.take(() => true)!.flow).toBe("heavy");
  });

  it("lets service fade with the half-life: an old heavy flow overtakes a recent light one", () => {
    const clock = new ManualClock();
    const service = newService(clock); // half-life 60 s
    const policy = new LeastAttainedPolicy<Item>(service);
    service.charge("old", 4_000);
    clock.advance(180_000); // three half-lives: 500 left
    service.charge("recent", 600);
    expect(service.value("old")).toBeCloseTo(500, 6);
    ["recent", "old"].forEach((flow, seq) => policy.push({ flow, band: 0, seq, id: seq }));
    expect(policy.take(() => true)!.flow).toBe("old");
  });

  it("breaks ties by arrival", () => {
    const policy = new LeastAttainedPolicy<Item>(newService());
    ["b", "a"].forEach((flow, seq) => policy.push({ flow, band: 0, seq, id: seq }));
    expect(policy.take(() => true)!.flow).toBe("b");
  });
});
