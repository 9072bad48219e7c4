// One contract every budget store passes (memory and redis), plus the redis store's failing open.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { BudgetStore } from "../../src/admission/budget-store.js";
import { RedisBudgetStore } from "../../src/admission/redis-budget-store.js";
import { TokenBudgets, type BudgetSettings } from "../../src/admission/token-budgets.js";
import { redisAvailable, startRedisServer, type RedisServer } from "../helpers/redis-server.js";

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

/** A store kind: `replicas(n)` gives n views of one shared budget (one process's store for memory). */
interface StoreKind {
  name: string;
  skip: boolean;
  replicas(n: number): Promise<BudgetStore[]>;
}

let redis: RedisServer | undefined;
const redisTool = redisAvailable();
let prefixCounter = 0;
const opened: RedisBudgetStore[] = [];

async function redisReplicas(n: number, health?: Health, timeoutMs = 200): Promise<RedisBudgetStore[]> {
  const keyPrefix = `t${prefixCounter++}:`;
  const stores: RedisBudgetStore[] = [];
  for (let i = 0; i < n; i++) {
    const store = new RedisBudgetStore(SETTINGS, {
      keyPrefix,
      link: {
        url: redis!.url,
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
    replicas: (n) => {
      const store = new TokenBudgets(SETTINGS);
      return Promise.resolve(Array.from({ length: n }, () => store));
    },
  },
  { name: "redis", skip: redisTool.skip, replicas: (n) => redisReplicas(n) },
];

beforeAll(async () => {
  if (!redisTool.skip) redis = await startRedisServer(redisTool.path!);
}, 30_000);

afterAll(async () => {
  for (const store of opened) await store.close();
  await redis?.stop();
});

describe.each(kinds)("budget store contract: $name", (kind) => {
  it.skipIf(kind.skip)(
    "admits under the budget and refuses at it, with used, budget and Retry-After",
    async () => {
      const [a, b] = await kind.replicas(2);
      expect(await a!.admit("agent", 0, 0)).toEqual({ allowed: true, reservedTokens: 0 });
      a!.settle("agent", 0, 600, 0);
      await a!.flush();
      b!.settle("agent", 0, 400, 10 * MINUTE_MS); // another replica: the same budget
      await b!.flush();
      expect(await a!.usage("agent", 10 * MINUTE_MS)).toBe(1000);
      // The first bucket ([0, 5 min)) leaves the window at 60 min: enough, then, to fall under 1000.
      expect(await a!.admit("agent", 0, 20 * MINUTE_MS)).toEqual({
        allowed: false,
        retryAfterSeconds: 40 * 60,
        used: 1000,
        budget: 1000,
      });
      expect(await b!.admit("agent", 0, 20 * MINUTE_MS)).toMatchObject({ allowed: false });
      expect((await b!.admit("agent", 0, 60 * MINUTE_MS)).allowed).toBe(true);
      expect(await b!.usage("agent", 60 * MINUTE_MS)).toBe(400);
    },
  );

  it.skipIf(kind.skip)("reserves at admission and settles to the real usage, or releases", async () => {
    const [a, b] = await kind.replicas(2);
    expect(await a!.admit("r", 700, 0)).toEqual({ allowed: true, reservedTokens: 700 });
    // The reservation counts at once, for every replica.
    expect(await b!.usage("r", 1)).toBe(700);
    expect((await b!.admit("r", 400, 1)).allowed).toBe(true);
    expect((await b!.admit("r", 1, 2)).allowed).toBe(false); // 1100 reserved
    a!.settle("r", 700, 100, 3);
    b!.release("r", 400, 3);
    await a!.flush();
    await b!.flush();
    expect(await a!.usage("r", 4)).toBe(100);
    expect(await b!.usage("r", 4)).toBe(100);
  });

  it.skipIf(kind.skip)("keeps agents apart and applies per-agent budgets", async () => {
    const [a] = await kind.replicas(1);
    a!.settle("big", 0, 4000, 0);
    a!.settle("small", 0, 10, 0);
    await a!.flush();
    expect((await a!.admit("big", 0, 1)).allowed).toBe(true);
    expect((await a!.admit("small", 0, 1)).allowed).toBe(true);
    a!.settle("big", 0, 1000, 1);
    await a!.flush();
    expect(await a!.admit("big", 0, 2)).toMatchObject({ allowed: false, budget: 5000, used: 5000 });
    expect(await a!.usage("nobody", 2)).toBe(0);
  });
});

describe.skipIf(redisTool.skip)("redis budget store fails open", () => {
  it("decides locally while Redis is dead, counts errors, and writes the charges back when it returns", async () => {
    const health: Health = { up: undefined, errors: 0 };
    const [a, b] = await redisReplicas(2, health);
    a!.settle("x", 0, 300, 0);
    await a!.flush();
    await redis!.kill();
    // Dead: admission still answers (from what this replica counted itself), never throws.
    expect(await a!.admit("x", 0, 1)).toEqual({ allowed: true, reservedTokens: 0 });
    a!.settle("x", 0, 500, 2);
    expect(health.errors).toBeGreaterThan(0);
    expect(health.up).toBe(false);
    expect(await a!.usage("x", 3)).toBe(800); // local view
    await redis!.restart(); // empty: everything before the restart is gone
    expect(await a!.connected(10_000)).toBe(true);
    expect(await b!.connected(10_000)).toBe(true);
    await a!.flush();
    await waitUntil(async () => (await b!.usage("x", 4)) === 500);
    expect(health.up).toBe(true);
    expect(a!.pendingCharges).toBe(0);
  }, 30_000);
});

async function waitUntil(condition: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
