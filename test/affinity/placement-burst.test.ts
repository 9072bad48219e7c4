// A burst of new sessions placed while their binding writes are under way (a store with a round trip, as Redis
// is): each placement counts as load on its backend until it is in flight, so the load bound holds for the burst.
import { describe, expect, it } from "vitest";
import { createBalancer } from "../../src/affinity/balancers.js";
import { MemoryBindingStore } from "../../src/affinity/memory-bindings.js";
import { PlacementService } from "../../src/affinity/placement-service.js";
import { StickyTable } from "../../src/affinity/sticky-table.js";
import { ManualClock } from "../../src/core/clock.js";
import { SeededRandom } from "../../src/core/random.js";
import {
  candidates,
  CountingRecorder,
  DEFAULT_LOAD_FACTOR,
  SlowWriteStore,
  TEST_HASH_KEY,
} from "./helpers.js";

function service(store: MemoryBindingStore): PlacementService {
  return new PlacementService({
    store,
    clock: new ManualClock(1_000_000),
    balancer: createBalancer("least_inflight", new SeededRandom(7)),
    recorder: new CountingRecorder(),
    stickyTtlMs: 60_000,
    rebalanceOnRecovery: false,
    loadFactor: DEFAULT_LOAD_FACTOR,
    sessionless: "prefix",
  });
}

describe("a burst placed during the binding store's round trip", () => {
  const list = candidates(4);
  // Eight new sessions whose rendezvous ranking puts engine-0 first: alone, each would go there.
  const sessions: string[] = [];
  const probe = service(new MemoryBindingStore(new StickyTable(1_000, TEST_HASH_KEY)));
  for (let i = 0; sessions.length < 8; i++) {
    if (probe.ranking(`burst-${i}`, list)[0]!.id === "engine-0") sessions.push(`burst-${i}`);
  }

  it("keeps to the load bound: the sessions placed before count as load while their writes are under way", async () => {
    const store = new SlowWriteStore(new StickyTable(1_000, TEST_HASH_KEY));
    const placing = service(store);
    const placed = sessions.map((id) => placing.place(id, "small", list));
    expect(store.writes).toHaveLength(8);
    // While the writes are under way, every placement counts on its backend.
    expect(list.reduce((n, c) => n + (c.placing ?? 0), 0)).toBe(8);
    for (const write of store.writes) write();
    const chosen = (await Promise.all(placed)).map((s) => s!.backend.id);
    const perEngine = new Map<string, number>();
    for (const id of chosen) perEngine.set(id, (perEngine.get(id) ?? 0) + 1);
    // The bound for the eighth of eight on four engines: ceil(1.25 x 8 / 4) = 3.
    for (const count of perEngine.values()) expect(count).toBeLessThanOrEqual(3);
    expect(perEngine.get("engine-0")).toBe(3);
    // Written, they are the dispatcher's to count (in flight): nothing stays counted as placing.
    expect(list.every((c) => (c.placing ?? 0) === 0)).toBe(true);
  });

  it("lets go of the count when the write fails", async () => {
    class FailingStore extends MemoryBindingStore {
      override apply(): Promise<void> {
        return Promise.reject(new Error("store down"));
      }
    }
    const failing = service(new FailingStore(new StickyTable(1_000, TEST_HASH_KEY)));
    await expect(failing.place(sessions[0]!, "small", list)).rejects.toThrow("store down");
    expect(list.every((c) => (c.placing ?? 0) === 0)).toBe(true);
  });
});
