// sticky_ttl_seconds: 0 disables affinity for real: no bindings, no rendezvous, least in-flight placement.
import { createBalancer } from "../../src/affinity/balancers.js";
import { beforeEach, describe, expect, it, vi } from "vitest";
import type { BindingStore } from "../../src/affinity/binding-store.js";
import * as rendezvous from "../../src/affinity/rendezvous.js";
import * as pipeline from "../../src/affinity/placement/pipeline.js";
import { MemoryBindingStore } from "../../src/affinity/memory-bindings.js";
import { PlacementService } from "../../src/affinity/placement-service.js";
import { StickyTable } from "../../src/affinity/sticky-table.js";
import { ManualClock } from "../../src/core/clock.js";
import { SeededRandom } from "../../src/core/random.js";
import { candidate, candidates, CountingRecorder, TEST_HASH_KEY, type TestCandidate } from "./helpers.js";

// Every rendezvous entry point the scheduler could use, wrapped in spies that still call through.
vi.mock("../../src/affinity/rendezvous.js", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../../src/affinity/rendezvous.js")>();
  return {
    ...actual,
    hashSession: vi.fn(actual.hashSession),
    rendezvousScore: vi.fn(actual.rendezvousScore),
    rendezvousWinner: vi.fn(actual.rendezvousWinner),
    rendezvousRanking: vi.fn(actual.rendezvousRanking),
  };
});
// And the placement pipeline, which bounded-load placement runs instead of rendezvousWinner.
vi.mock("../../src/affinity/placement/pipeline.js", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../../src/affinity/placement/pipeline.js")>();
  return { ...actual, runPipeline: vi.fn(actual.runPipeline) };
});

/** A store that fails the test if the scheduler touches it at all (beyond onBackendDown's break). */
function untouchableStore(): BindingStore & { calls: string[] } {
  const calls: string[] = [];
  const refuse = (name: string) => () => {
    calls.push(name);
    throw new Error(`store.${name} called with affinity disabled`);
  };
  return {
    calls,
    lookup: refuse("lookup"),
    apply: refuse("apply"),
    breakBackend: () => {
      calls.push("breakBackend");
      return Promise.resolve(0);
    },
    countFor: () => 0,
    moveSessions: refuse("moveSessions"),
    sweep: refuse("sweep"),
    clear: refuse("clear"),
    onBroken: () => undefined,
    connected: refuse("connected"),
    configure: refuse("configure"),
    flush: refuse("flush"),
    close: refuse("close"),
  };
}

function disabled(seed = 7) {
  const store = untouchableStore();
  const recorder = new CountingRecorder();
  const scheduler = new PlacementService({
    store,
    clock: new ManualClock(0),
    balancer: createBalancer("least_inflight", new SeededRandom(seed)),
    recorder,
    stickyTtlMs: 0,
    rebalanceOnRecovery: true,
    loadFactor: 1.25,
    sessionless: "prefix",
  });
  return { scheduler, store, recorder };
}

function tally(picks: readonly string[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const id of picks) counts.set(id, (counts.get(id) ?? 0) + 1);
  return counts;
}

describe("PlacementService with sticky_ttl_seconds: 0", () => {
  beforeEach(() => {
    vi.mocked(rendezvous.hashSession).mockClear();
    vi.mocked(rendezvous.rendezvousScore).mockClear();
    vi.mocked(rendezvous.rendezvousWinner).mockClear();
    vi.mocked(rendezvous.rendezvousRanking).mockClear();
    vi.mocked(pipeline.runPipeline).mockClear();
  });

  it("binds nothing, never calls rendezvous, and reports only misses (reason affinity_disabled)", async () => {
    const { scheduler, store, recorder } = disabled();
    const list = candidates(4);
    for (let turn = 0; turn < 6; turn++) {
      const selection = (await scheduler.place("session-1", "small", list))!;
      expect(selection).toMatchObject({ affinityHit: false, reason: "affinity_disabled" });
    }
    expect(scheduler.affinityEnabled).toBe(false);
    expect(store.calls).toEqual([]);
    expect(rendezvous.hashSession).not.toHaveBeenCalled();
    expect(rendezvous.rendezvousScore).not.toHaveBeenCalled();
    expect(rendezvous.rendezvousWinner).not.toHaveBeenCalled();
    expect(rendezvous.rendezvousRanking).not.toHaveBeenCalled();
    expect(pipeline.runPipeline).not.toHaveBeenCalled();
    expect(recorder.totals("small")).toEqual({ hits: 0, misses: 6, broken: 0 });
  });

  it("control: the spies do see rendezvous when affinity is on (so the checks above are not vacuous)", async () => {
    const { scheduler } = disabled();
    scheduler.configure({
      stickyTtlMs: 1_800_000,
      rebalanceOnRecovery: false,
      balancer: createBalancer("least_inflight", new SeededRandom(1)),
      loadFactor: 1.25,
      sessionless: "prefix",
    });
    await expect(scheduler.place("s", "small", candidates(2))).rejects.toThrow(/store\.lookup/);
    const enabled = new PlacementService({
      store: new MemoryBindingStore(new StickyTable(8, TEST_HASH_KEY)),
      clock: new ManualClock(0),
      balancer: createBalancer("least_inflight", new SeededRandom(1)),
      recorder: new CountingRecorder(),
      stickyTtlMs: 1_800_000,
      loadFactor: 0,
      sessionless: "prefix",
    });
    await enabled.place("s", "small", candidates(2));
    expect(rendezvous.hashSession).toHaveBeenCalledTimes(1);
    expect(rendezvous.rendezvousWinner).toHaveBeenCalledTimes(1);
    const bounded = new PlacementService({
      store: new MemoryBindingStore(new StickyTable(8, TEST_HASH_KEY)),
      clock: new ManualClock(0),
      balancer: createBalancer("least_inflight", new SeededRandom(1)),
      recorder: new CountingRecorder(),
      stickyTtlMs: 1_800_000,
      loadFactor: 1.25,
      sessionless: "prefix",
    });
    await bounded.place("s", "small", candidates(2));
    await bounded.place(undefined, "small", candidates(2), undefined, { prefixKey: { hi: 1, lo: 2 } });
    // Idle backends: the winner is within its bound, found without the pipeline.
    expect(rendezvous.rendezvousWinner).toHaveBeenCalledTimes(3);
    const loaded = candidates(2);
    loaded.find((c) => c.id === bounded.ranking("t", loaded)[0]!.id)!.inflight = 5;
    await bounded.place("t", "small", loaded);
    expect(pipeline.runPipeline).toHaveBeenCalledTimes(1);
  });

  it("counts nothing as broken and moves nothing on failures, outages and recoveries", async () => {
    const { scheduler, store, recorder } = disabled();
    const list = candidates(3);
    await scheduler.place("s", "small", list);
    await scheduler.onAttemptFailed("s", "small", "engine-0");
    expect(await scheduler.onBackendDown("engine-0", "small")).toBe(0);
    expect(await scheduler.onBackendUp("engine-0", list)).toBe(0);
    expect(recorder.totals("small")).toEqual({ hits: 0, misses: 1, broken: 0 });
    expect(store.calls.filter((c) => c !== "breakBackend")).toEqual([]);
    expect(rendezvous.rendezvousWinner).not.toHaveBeenCalled();
  });

  it("picks the least in-flight backend that is up and not excluded", async () => {
    const { scheduler } = disabled();
    const list = [
      candidate("busy", { inflight: 9 }),
      candidate("idle-but-draining", { inflight: 0, state: "draining" }),
      candidate("idle-but-down", { inflight: 0, state: "down" }),
      candidate("light", { inflight: 2 }),
      candidate("medium", { inflight: 4 }),
    ];
    for (let i = 0; i < 50; i++)
      expect((await scheduler.place("s", "small", list))!.backend.id).toBe("light");
    expect((await scheduler.place("s", "small", list, new Set(["light"])))!.backend.id).toBe("medium");
  });

  it("breaks ties with the seeded random source, so same-session requests spread evenly over tied backends", async () => {
    const { scheduler } = disabled(42);
    const list: TestCandidate[] = [
      candidate("a", { inflight: 1 }),
      candidate("b", { inflight: 1 }),
      candidate("c", { inflight: 5 }),
      candidate("d", { inflight: 1 }),
    ];
    const picks: string[] = [];
    for (let i = 0; i < 3_000; i++)
      picks.push((await scheduler.place("same-session", "small", list))!.backend.id);
    const counts = tally(picks);
    expect(counts.get("c")).toBeUndefined();
    for (const id of ["a", "b", "d"]) expect(Math.abs(counts.get(id)! - 1_000)).toBeLessThan(100);
  });

  it("replays exactly for the same seed and differs for another", async () => {
    const list = candidates(4);
    const run = async (seed: number) => {
      const { scheduler } = disabled(seed);
      const picks: string[] = [];
      for (let i = 0; i < 40; i++) picks.push((await scheduler.place("s", "small", list))!.backend.id);
      return picks;
    };
    expect(await run(5)).toEqual(await run(5));
    expect(await run(5)).not.toEqual(await run(6));
  });
});
