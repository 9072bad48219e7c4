// Which engine stores each response: bounded, with a TTL on the injected clock that every use refreshes.
import { describe, expect, it } from "vitest";
import { ResponseOwners } from "../../src/affinity/response-owners.js";
import { ManualClock } from "../../src/core/clock.js";

const owner = (backendId: string) => ({ backendId, sessionKey: `chain-${backendId}` });

describe("ResponseOwners", () => {
  it("forgets a response ttl after its last use, and a use refreshes it", () => {
    const clock = new ManualClock(1_000);
    const owners = new ResponseOwners(clock, { ttlMs: 10_000, maxEntries: 10 });
    owners.remember("resp_1", owner("small-0"));
    clock.advance(9_000);
    expect(owners.owner("resp_1")).toEqual(owner("small-0"));
    clock.advance(9_000); // 18 s after it was stored, 9 s after its last use
    expect(owners.owner("resp_1")).toEqual(owner("small-0"));
    clock.advance(10_001);
    expect(owners.owner("resp_1")).toBeUndefined();
  });

  it("keeps at most max_entries, forgetting the least recently used", () => {
    const owners = new ResponseOwners(new ManualClock(), { ttlMs: 60_000, maxEntries: 2 });
    owners.remember("a", owner("small-0"));
    owners.remember("b", owner("small-1"));
    owners.owner("a");
    owners.remember("c", owner("big-0"));
    expect(owners.owner("b")).toBeUndefined();
    expect(owners.owner("a")?.backendId).toBe("small-0");
    expect(owners.size).toBe(2);
  });

  it("carries known owners over when a reload changes its settings, and forgets on delete", () => {
    const owners = new ResponseOwners(new ManualClock(), { ttlMs: 60_000, maxEntries: 5 });
    owners.remember("a", owner("small-0"));
    owners.remember("b", owner("small-1"));
    owners.configure({ ttlMs: 120_000, maxEntries: 1 });
    expect(owners.owner("b")?.backendId).toBe("small-1");
    expect(owners.owner("a")).toBeUndefined();
    owners.forget("b");
    expect(owners.owner("b")).toBeUndefined();
  });
});
