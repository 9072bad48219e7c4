// Attained service shared by replicas through a real Redis: totals add up, decay on the callers' clock, fail open.
import { afterEach, describe, expect, it } from "vitest";
import { AttainedService } from "../../../src/admission/flow-queue/attained-service.js";
import { RedisAttainedService } from "../../../src/admission/flow-queue/redis-attained-service.js";
import { ManualClock, ManualTimers } from "../../../src/core/clock.js";
import { useRedisServer } from "../../helpers/redis-server.js";

const redis = useRedisServer();
let prefixes = 0;
const opened: RedisAttainedService[] = [];
const quietLogger = { warn: () => undefined, info: () => undefined };
const HALF_LIFE_MS = 60_000;

afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
});

/** Replicas on one clock, each with its own local service and link; syncs run only when a test calls them. */
async function replicas(
  n: number,
  clock: ManualClock,
): Promise<{ local: AttainedService; shared: RedisAttainedService }[]> {
  const keyPrefix = `t${prefixes++}:flow:`;
  const out = [];
  for (let i = 0; i < n; i++) {
    const local = new AttainedService({ halfLifeMs: HALF_LIFE_MS, maxFlows: 100 }, clock);
    const shared = new RedisAttainedService(
      local,
      {
        keyPrefix,
        syncIntervalMs: 1000,
        halfLifeMs: HALF_LIFE_MS,
        link: {
          url: redis.server.url,
          timeoutMs: 200,
          logger: quietLogger,
          health: { up: () => undefined, error: () => undefined },
        },
      },
      clock,
      new ManualTimers(clock),
    );
    opened.push(shared);
    expect(await shared.connected(10_000)).toBe(true);
    out.push({ local, shared });
  }
  return out;
}

describe.skipIf(redis.skip)("attained service shared through Redis", () => {
  it("adds the replicas' service up and decays it on the callers' clock", async () => {
    const clock = new ManualClock(1_000_000);
    const [a, b] = await replicas(2, clock);
    a!.local.charge("x", 1000);
    await a!.shared.sync();
    b!.local.charge("x", 10);
    await b!.shared.sync();
    expect(b!.local.value("x")).toBeCloseTo(1010, 6);
    clock.advance(HALF_LIFE_MS);
    a!.local.charge("x", 1);
    await a!.shared.sync();
    expect(a!.local.value("x")).toBeCloseTo(506, 6);
  });

  it("goes on with its own counts while Redis is away and adds them when it is back", async () => {
    const clock = new ManualClock(0);
    const [a, b] = await replicas(2, clock);
    await redis.server.kill();
    a!.local.charge("y", 300);
    await a!.shared.sync(); // fails open: kept for the next sync
    expect(a!.local.value("y")).toBe(300);
    await redis.server.restart();
    expect(await a!.shared.connected(10_000)).toBe(true);
    expect(await b!.shared.connected(10_000)).toBe(true);
    await a!.shared.sync();
    b!.local.charge("y", 1);
    await b!.shared.sync();
    expect(b!.local.value("y")).toBeCloseTo(301, 6);
  }, 30_000);
});
