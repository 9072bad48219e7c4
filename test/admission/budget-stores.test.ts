// One contract every budget store passes (memory and redis, each directly), the redis store across replicas, and its failing open.
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import type { BudgetStore } from "../../src/admission/budget-store.js";
import { RedisBudgetStore } from "../../src/admission/redis-budget-store.js";
import { TokenBudgets, type BudgetSettings } from "../../src/admission/token-budgets.js";
import { useRedisServer } from "../helpers/redis-server.js";

const MINUTE_MS = 60_000;
const SETTINGS: BudgetSettings = {
  windowMs: 60 * MINUTE_MS,
  defaultBudget: 1000,
  overrides: new Map([["big", 5000]]),
  maxAgents: 1000,
};
const quietLogger = { warn: () => undefined, info: () => undefined };

interface Health {
  up: boolean | undefined;
  errors: number;
}

/** A store kind: `one()` gives one store instance. */
interface StoreKind {
  name: string;
  skip: boolean;
  one(): Promise<BudgetStore>;
}

const redis = useRedisServer(async () => {
  for (const store of opened) await store.close();
});
let prefixCounter = 0;
const opened: RedisBudgetStore[] = [];

async function redisReplicas(n: number, health?: Health, timeoutMs = 200): Promise<RedisBudgetStore[]> {
  const keyPrefix = `t${prefixCounter++}:`;
  const stores: RedisBudgetStore[] = [];
  for (let i = 0; i < n; i++) {
    const store = new RedisBudgetStore(SETTINGS, {
      keyPrefix,
      link: {
        url: redis.server.url,
        timeoutMs,
        logger: quietLogger,
        health: {
          up: (up) => {
            if (health) health.up = up;
          },
          error: () => {
            if (health) health.errors++;
          },
        },
      },
    });
    opened.push(store);
    expect(await store.connected(10_000)).toBe(true);
    stores.push(store);
  }
  return stores;
}

const kinds: StoreKind[] = [
  {
    name: "memory",
    skip: false,
    one: () => Promise.resolve(new TokenBudgets(SETTINGS)),
  },
  { name: "redis", skip: redis.skip, one: async () => (await redisReplicas(1))[0]! },
];

/** Charges `tokens` the way a request does: a hold of nothing, settled to what it used. */
async function spend(store: BudgetStore, agentId: string, tokens: number, nowMs: number): Promise<void> {
  const decision = await store.reserve(agentId, 0, 0, nowMs, false);
  if (!decision.allowed) throw new Error(`spend refused for ${agentId}`);
  store.settle(decision.reservation, tokens, nowMs);
}

/** Charges from `a` and then `b` count in one window (a and b: one store, or two replicas sharing one). */
async function oneWindow(a: BudgetStore, b: BudgetStore): Promise<void> {
  await spend(a, "agent", 600, 0);
  await a.flush();
  await spend(b, "agent", 400, 10 * MINUTE_MS); // from b: the same budget
  await b.flush();
  expect(await a.usage("agent", 10 * MINUTE_MS)).toBe(1000);
  // The first bucket ([0, 5 min)) leaves the window at 60 min: enough, then, to fall under 1000.
  expect(await a.reserve("agent", 10, 1, 20 * MINUTE_MS, false)).toEqual({
    allowed: false,
    reason: "budget",
    retryAfterSeconds: 40 * 60,
    used: 1000,
    budget: 1000,
  });
  expect(await b.reserve("agent", 10, 1, 20 * MINUTE_MS, false)).toMatchObject({ allowed: false });
  expect(await b.reserve("agent", 10, 1, 60 * MINUTE_MS, false)).toMatchObject({
    allowed: true,
    granted: 10,
  });
  expect(await b.usage("agent", 60 * MINUTE_MS)).toBe(410);
}

/** A hold from `a` counts at once for `b`; settles bring it down to real usage. */
async function holdsThenSettles(a: BudgetStore, b: BudgetStore): Promise<void> {
  const first = await a.reserve("r", 700, 1, 0, false);
  expect(first).toMatchObject({ allowed: true, granted: 700 });
  // The hold counts at once, for every replica; the next one gets only what is left.
  expect(await b.usage("r", 1)).toBe(700);
  const second = await b.reserve("r", 400, 1, 1, false);
  expect(second).toMatchObject({ allowed: true, granted: 300 });
  expect(await b.reserve("r", 1, 1, 2, false)).toMatchObject({ allowed: false, reason: "budget" });
  // Without a limit of its own a request gets all that is left, and none is left here.
  expect(await a.reserve("r", Number.POSITIVE_INFINITY, 5, 2, false)).toMatchObject({ allowed: false });
  if (!first.allowed || !second.allowed) throw new Error("unreachable");
  a.settle(first.reservation, 100, 3);
  b.settle(second.reservation, 0, 3);
  await a.flush();
  await b.flush();
  expect(await a.usage("r", 4)).toBe(100);
  expect(await b.usage("r", 4)).toBe(100);
  expect(await a.reserve("r", Number.POSITIVE_INFINITY, 5, 4, false)).toMatchObject({ granted: 900 });
}

describe.each(kinds)("budget store contract: $name", (kind) => {
  it.skipIf(kind.skip)(
    "admits under the budget and refuses at it, with used, budget and Retry-After",
    async () => {
      const store = await kind.one();
      await oneWindow(store, store);
    },
  );

  it.skipIf(kind.skip)(
    "holds what a request may use, clamped to what is left, then settles to real usage",
    async () => {
      const store = await kind.one();
      await holdsThenSettles(store, store);
    },
  );

  it.skipIf(kind.skip)("keeps agents apart and applies per-agent budgets", async () => {
    const a = await kind.one();
    await spend(a, "big", 4000, 0);
    await spend(a, "small", 10, 0);
    await a.flush();
    expect((await a.reserve("big", 0, 1, 1, false)).allowed).toBe(true);
    expect((await a.reserve("small", 0, 1, 1, false)).allowed).toBe(true);
    await spend(a, "big", 1000, 1);
    await a.flush();
    expect(await a.reserve("big", 0, 1, 2, false)).toMatchObject({
      allowed: false,
      budget: 5000,
      used: 5000,
    });
    expect(await a.usage("nobody", 2)).toBe(0);
  });
});

// The memory store is one process's: N replicas give an agent N budgets (docs/configuration.md), so only
// the redis store is run across replicas, each replica with its own store instance.
describe.skipIf(redis.skip)("redis budget store across replicas, one store each", () => {
  it("counts every replica's charges in one window", async () => {
    const [a, b] = await redisReplicas(2);
    await oneWindow(a!, b!);
  });

  it("makes one replica's hold count at once for the others", async () => {
    const [a, b] = await redisReplicas(2);
    await holdsThenSettles(a!, b!);
  });
});

describe.skipIf(redis.skip)("redis budget store fails open", () => {
  it("decides locally while Redis is dead, counts errors, and writes the charges back when it returns", async () => {
    const health: Health = { up: undefined, errors: 0 };
    const [a, b] = await redisReplicas(2, health);
    await spend(a!, "x", 300, 0);
    await a!.flush();
    await redis.server.kill();
    // Dead: admission still answers (from what this replica counted itself), never throws.
    const local = await a!.reserve("x", 0, 1, 1, false);
    expect(local).toMatchObject({ allowed: true, granted: 0 });
    if (local.allowed) a!.settle(local.reservation, 500, 2);
    expect(health.errors).toBeGreaterThan(0);
    expect(health.up).toBe(false);
    expect(await a!.usage("x", 3)).toBe(800); // local view
    await redis.server.restart(); // empty: everything before the restart is gone
    expect(await a!.connected(10_000)).toBe(true);
    expect(await b!.connected(10_000)).toBe(true);
    await a!.flush();
    // a's flush resolved once Redis answered the replayed write: b reads it there.
    expect(await b!.usage("x", 4)).toBe(500);
    expect(health.up).toBe(true);
    expect(a!.pendingWrites).toBe(0);
  }, 30_000);
});

describe.skipIf(redis.skip)("redis budget store hot path", () => {
  it("settles a request in one command, the hold leaving the bucket it was counted in", async () => {
    const [a] = await redisReplicas(1);
    const hold = await a!.reserve("one", 700, 1, 0, false); // counted in the first bucket, [0, 5 min)
    if (!hold.allowed) throw new Error("refused");
    const stats = async () => Number(/cmdstat_evalsha:calls=(\d+)/.exec(await redisInfo())?.[1] ?? 0);
    const before = await stats();
    a!.settle(hold.reservation, 100, 6 * MINUTE_MS); // used 100, counted in the second bucket
    await a!.flush();
    expect((await stats()) - before).toBe(1);
    expect(await a!.usage("one", 6 * MINUTE_MS)).toBe(100);
    // The first bucket leaves the window at 60 min: the hold and its release leave together.
    expect(await a!.usage("one", 61 * MINUTE_MS)).toBe(100);
    expect(await a!.usage("one", 66 * MINUTE_MS)).toBe(0);
  });
});

/** INFO commandstats of the test's redis-server, through a connection of its own. */
async function redisInfo(): Promise<string> {
  const client = new Redis(redis.server.url);
  try {
    return await client.info("commandstats");
  } finally {
    client.disconnect();
  }
}
