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
