import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { HealthStateMachine, type Health } from "../../src/backends/health-state.js";

describe("HealthStateMachine", () => {
  it("starts up (or as told)", () => {
    expect(new HealthStateMachine({ failuresToMarkDown: 3, successesToMarkUp: 2 }).health).toBe("up");
    expect(new HealthStateMachine({ failuresToMarkDown: 3, successesToMarkUp: 2 }, "down").health).toBe(
      "down",
    );
  });

  it("goes down on exactly the third consecutive failure, reporting the transition once", () => {
    const machine = new HealthStateMachine({ failuresToMarkDown: 3, successesToMarkUp: 2 });
    expect(machine.recordFailure()).toBeUndefined();
    expect(machine.recordFailure()).toBeUndefined();
    expect(machine.health).toBe("up");
    expect(machine.failureStreak).toBe(2);
    expect(machine.recordFailure()).toBe("down");
    expect(machine.health).toBe("down");
    expect(machine.recordFailure()).toBeUndefined(); // already down: no second transition
    expect(machine.failureStreak).toBe(4);
  });

  it("comes back up on exactly the second consecutive success", () => {
    const machine = new HealthStateMachine({ failuresToMarkDown: 3, successesToMarkUp: 2 }, "down");
    expect(machine.recordSuccess()).toBeUndefined();
    expect(machine.health).toBe("down");
    expect(machine.recordSuccess()).toBe("up");
    expect(machine.recordSuccess()).toBeUndefined();
    expect(machine.health).toBe("up");
  });

  it("resets the failure streak on a success in between (fail, fail, ok, fail, fail stays up)", () => {
    const machine = new HealthStateMachine({ failuresToMarkDown: 3, successesToMarkUp: 2 });
    machine.recordFailure();
    machine.recordFailure();
    machine.recordSuccess();
    expect(machine.failureStreak).toBe(0);
    machine.recordFailure();
    expect(machine.recordFailure()).toBeUndefined();
    expect(machine.health).toBe("up");
    expect(machine.recordFailure()).toBe("down");
  });

  it("resets the success streak on a failure in between (ok, fail, ok stays down)", () => {
    const machine = new HealthStateMachine({ failuresToMarkDown: 1, successesToMarkUp: 2 }, "down");
    machine.recordSuccess();
    machine.recordFailure();
    expect(machine.recordSuccess()).toBeUndefined();
    expect(machine.health).toBe("down");
    expect(machine.recordSuccess()).toBe("up");
  });

  it("acts on the first failure when failures_to_mark_down is 1", () => {
    const machine = new HealthStateMachine({ failuresToMarkDown: 1, successesToMarkUp: 1 });
    expect(machine.recordFailure()).toBe("down");
    expect(machine.recordSuccess()).toBe("up");
  });

  it("applies new thresholds to the streak in progress", () => {
    const machine = new HealthStateMachine({ failuresToMarkDown: 5, successesToMarkUp: 2 });
    machine.recordFailure();
    machine.recordFailure();
    machine.setThresholds({ failuresToMarkDown: 3, successesToMarkUp: 2 });
    expect(machine.recordFailure()).toBe("down");
  });

  it("matches a streak-counting model for any thresholds and any outcome sequence", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 6 }),
        fc.array(fc.boolean(), { maxLength: 80 }),
        (down, up, outcomes) => {
          const machine = new HealthStateMachine({ failuresToMarkDown: down, successesToMarkUp: up });
          let health: Health = "up";
          let failures = 0;
          let successes = 0;
          for (const ok of outcomes) {
            const before = health;
            if (ok) {
              failures = 0;
              successes++;
              if (health === "down" && successes >= up) health = "up";
            } else {
              successes = 0;
              failures++;
              if (health === "up" && failures >= down) health = "down";
            }
            const reported = ok ? machine.recordSuccess() : machine.recordFailure();
            expect(reported).toBe(health !== before ? health : undefined);
            expect(machine.health).toBe(health);
          }
        },
      ),
      { seed: 42, numRuns: 300 },
    );
  });
});

describe("HealthStateMachine: outlier ejection and progress", () => {
  const ejection = { consecutiveFailures: 3, baseMs: 30_000, maxMs: 120_000, stallMs: 10_000 };
  const thresholds = { failuresToMarkDown: 3, successesToMarkUp: 2, ejection };

  it("ejects on the third consecutive request failure, whatever the probes say, for a growing time", () => {
    const m = new HealthStateMachine(thresholds);
    expect(m.recordRequest(false, 0, true)).toEqual({ to: undefined, eject: "none" });
    expect(m.recordProbe(true, 1)).toBeUndefined();
    expect(m.recordRequest(false, 2, true)).toEqual({ to: undefined, eject: "none" });
    expect(m.recordRequest(false, 3, true)).toEqual({ to: "down", eject: "ejected" });
    expect(m.ejectedUntilMs).toBe(30_003);
    // Passing probes before the ejection ends change nothing.
    expect(m.recordProbe(true, 20_000)).toBeUndefined();
    expect(m.recordProbe(true, 30_002)).toBeUndefined();
    expect(m.health).toBe("down");
    // The first passing probe after it brings the engine back.
    expect(m.recordProbe(true, 30_003)).toBe("up");
    // Ejected again soon after: twice as long, then capped.
    for (let i = 0; i < 3; i++) m.recordRequest(false, 40_000, true);
    expect(m.ejectedUntilMs).toBe(100_000);
    m.recordProbe(true, 100_000);
    for (let i = 0; i < 3; i++) m.recordRequest(false, 100_001, true);
    expect(m.ejectedUntilMs).toBe(100_001 + 120_000);
    m.recordProbe(true, 300_000);
    // A long healthy spell (over maxMs) and the next ejection is short again.
    for (let i = 0; i < 3; i++) m.recordRequest(false, 500_000, true);
    expect(m.ejectedUntilMs).toBe(530_000);
  });

  it("a request success in between resets the streak; a failing probe keeps an ejected engine out", () => {
    const m = new HealthStateMachine(thresholds);
    m.recordRequest(false, 0, true);
    m.recordRequest(false, 0, true);
    m.recordRequest(true, 0, true);
    m.recordRequest(false, 0, true);
    m.recordRequest(false, 0, true);
    expect(m.health).toBe("up");
    m.recordRequest(false, 0, true);
    expect(m.health).toBe("down");
    expect(m.recordProbe(false, 40_000)).toBeUndefined();
    expect(m.health).toBe("down");
    expect(m.recordProbe(true, 40_001)).toBe("up");
  });

  it("withholds the ejection when told the engine may not leave (the tier's last)", () => {
    const m = new HealthStateMachine(thresholds);
    m.recordRequest(false, 0, false);
    m.recordRequest(false, 0, false);
    expect(m.recordRequest(false, 0, false)).toEqual({ to: undefined, eject: "withheld" });
    expect(m.health).toBe("up");
  });

  it("a busy engine whose token counter stands still for stallMs is hung; an idle one never is", () => {
    const m = new HealthStateMachine(thresholds);
    expect(m.recordProgress(100, false, 0, true).eject).toBe("none");
    expect(m.recordProgress(100, false, 50_000, true).eject).toBe("none"); // idle: not a stall
    expect(m.recordProgress(100, true, 55_000, true).eject).toBe("none");
    expect(m.recordProgress(120, true, 64_000, true).eject).toBe("none"); // moved
    expect(m.recordProgress(120, true, 73_999, true).eject).toBe("none");
    expect(m.recordProgress(120, true, 74_000, true)).toEqual({ to: "down", eject: "ejected" });
    expect(m.ejectedUntilMs).toBe(104_000);
  });

  it("without an ejection policy nothing is ejected (the probe streak alone decides)", () => {
    const m = new HealthStateMachine({ failuresToMarkDown: 3, successesToMarkUp: 2 });
    for (let i = 0; i < 10; i++) m.recordRequest(false, i, true);
    m.recordProgress(1, true, 0, true);
    expect(m.recordProgress(1, true, 1e9, true).eject).toBe("none");
    expect(m.health).toBe("up");
  });
});
