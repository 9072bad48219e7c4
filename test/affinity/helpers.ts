// Shared fixtures for the affinity tests: candidates, a counting recorder, UUID-like ids from a seeded source.
import { createBalancer } from "../../src/affinity/balancers.js";
import { hashString } from "../../src/affinity/hash.js";
import type { BackendState, SchedulingCandidate, SessionlessMode } from "../../src/affinity/decide.js";
import type { BindingEffect } from "../../src/affinity/binding-store.js";
import { MemoryBindingStore } from "../../src/affinity/memory-bindings.js";
import { PlacementService, type AffinityRecorder } from "../../src/affinity/placement-service.js";
import type { EngineSignals } from "../../src/affinity/placement/types.js";
import { StickyTable } from "../../src/affinity/sticky-table.js";
import { ManualClock } from "../../src/core/clock.js";
import { SeededRandom } from "../../src/core/random.js";

/** A mutable candidate, as the registry's Backend is: tests flip state and load in place. */
export interface TestCandidate extends SchedulingCandidate {
  state: BackendState;
  inflight: number;
  queued: number;
  maxInflight: number;
  weight: number;
  engineLoad: EngineSignals | undefined;
}

/** max_inflight's config default: with it, the tests' candidates always have a free slot unless told. */
export const DEFAULT_MAX_INFLIGHT = 64;

/** A memory store whose writes finish only when the test says so, as a Redis write's round trip would. */
export class SlowWriteStore extends MemoryBindingStore {
  readonly writes: (() => void)[] = [];

  override apply(effects: readonly BindingEffect[], nowMs: number): Promise<void> {
    super.apply(effects, nowMs);
    return new Promise((resolve) => this.writes.push(resolve));
  }
}

export function candidate(
  id: string,
  options: Partial<
    Pick<TestCandidate, "state" | "inflight" | "weight" | "queued" | "maxInflight" | "engineLoad">
  > = {},
) {
  const made: TestCandidate = {
    id,
    idHash: hashString(id),
    weight: options.weight ?? 1,
    state: options.state ?? "up",
    inflight: options.inflight ?? 0,
    queued: options.queued ?? 0,
    maxInflight: options.maxInflight ?? DEFAULT_MAX_INFLIGHT,
    engineLoad: options.engineLoad,
  };
  return made;
}

/** `count` candidates named `${prefix}-0` ... */
export function candidates(count: number, prefix = "engine"): TestCandidate[] {
  return Array.from({ length: count }, (_, i) => candidate(`${prefix}-${i}`));
}

/** Plain counters per tier, and the raw call log (to check that broken is reported once, with its count). */
export class CountingRecorder implements AffinityRecorder {
  readonly hits = new Map<string, number>();
  readonly misses = new Map<string, number>();
  readonly brokenCounts = new Map<string, number>();
  readonly brokenCalls: { tier: string; count: number }[] = [];

  hit(tier: string): void {
    this.hits.set(tier, (this.hits.get(tier) ?? 0) + 1);
  }

  miss(tier: string): void {
    this.misses.set(tier, (this.misses.get(tier) ?? 0) + 1);
  }

  readonly spills = new Map<string, number>();

  broken(tier: string, count: number): void {
    this.brokenCalls.push({ tier, count });
    this.brokenCounts.set(tier, (this.brokenCounts.get(tier) ?? 0) + count);
  }

  spill(tier: string): void {
    this.spills.set(tier, (this.spills.get(tier) ?? 0) + 1);
  }

  totals(tier: string): { hits: number; misses: number; broken: number } {
    return {
      hits: this.hits.get(tier) ?? 0,
      misses: this.misses.get(tier) ?? 0,
      broken: this.brokenCounts.get(tier) ?? 0,
    };
  }
}

const HEX_BYTE = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"));

function hex8(random: SeededRandom): string {
  const word = Math.floor(random.next() * 4294967296);
  return (
    HEX_BYTE[word >>> 24]! +
    HEX_BYTE[(word >>> 16) & 0xff]! +
    HEX_BYTE[(word >>> 8) & 0xff]! +
    HEX_BYTE[word & 0xff]!
  );
}

/** A 36-character UUID-v4-shaped id drawn from `random` (deterministic for a seeded source). */
export function uuidLike(random: SeededRandom): string {
  const a = hex8(random);
  const b = hex8(random);
  const c = hex8(random);
  const d = hex8(random);
  return `${a}-${b.slice(0, 4)}-4${b.slice(5)}-${c.slice(0, 4)}-${c.slice(4)}${d}`;
}

const idCache = new Map<string, readonly string[]>();

/**
 * `count` UUID-like session ids from a fixed seed (memoized: several tests share a set). They are distinct:
 * 128 bits from a 2^32-period generator never repeat within a run (the hash test checks 100,000 of them).
 */
export function sessionIds(count: number, seed = 1): readonly string[] {
  const key = `${count}:${seed}`;
  let ids = idCache.get(key);
  if (ids === undefined) {
    const random = new SeededRandom(seed);
    ids = Array.from({ length: count }, () => uuidLike(random));
    idCache.set(key, ids);
  }
  return ids;
}

/** affinity.load_factor's config default: the seed's tests run under the bound, as the gateway does. */
export const DEFAULT_LOAD_FACTOR = 1.25;

/** A fixed sticky-table hash key, so test runs replay exactly (the gateway draws a random one). */
export const TEST_HASH_KEY: readonly [number, number] = [0x243f6a88, 0x85a308d3];

export interface Harness {
  scheduler: PlacementService;
  /** The memory store's table, to inspect. */
  store: StickyTable;
  clock: ManualClock;
  recorder: CountingRecorder;
}

export function harness(
  options: {
    ttlSeconds?: number;
    rebalance?: boolean;
    maxBindings?: number;
    seed?: number;
    loadFactor?: number;
    sessionless?: SessionlessMode;
  } = {},
): Harness {
  const store = new StickyTable(options.maxBindings ?? 100_000, TEST_HASH_KEY);
  const clock = new ManualClock(1_000_000);
  const recorder = new CountingRecorder();
  const scheduler = new PlacementService({
    store: new MemoryBindingStore(store),
    clock,
    balancer: createBalancer("least_inflight", new SeededRandom(options.seed ?? 7)),
    recorder,
    stickyTtlMs: (options.ttlSeconds ?? 1800) * 1000,
    rebalanceOnRecovery: options.rebalance ?? false,
    loadFactor: options.loadFactor ?? DEFAULT_LOAD_FACTOR,
    sessionless: options.sessionless ?? "prefix",
  });
  return { scheduler, store, clock, recorder };
}
