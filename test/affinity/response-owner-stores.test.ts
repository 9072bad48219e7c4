// The ResponseOwnerStore contract, run against each store: memory, and Redis (several replicas' stores over
// one redis-server, each with its own local view). Only the Redis store is shared: it is the one tested across
// replicas, with read-your-writes (a remember() that resolved is readable by every replica) and fail-open.
import { describe, expect, it } from "vitest";
import { RESPONSE_OWNER_SCRIPTS, RedisResponseOwners } from "../../src/affinity/redis-response-owners.js";
import type { ResponseOwnerStore } from "../../src/affinity/response-owner-store.js";
import { ResponseOwners } from "../../src/affinity/response-owners.js";
import { ManualClock } from "../../src/core/clock.js";
import type { RedisLink } from "../../src/store/redis-link.js";
import { quietRedisLink, useRedisServer } from "../helpers/redis-server.js";

const SETTINGS = { ttlMs: 60_000, maxEntries: 1000 };
const owner = (backendId: string, sessionKey = `response-chain:${backendId}`) => ({ backendId, sessionKey });

const links: RedisLink[] = [];
const redis = useRedisServer(async () => {
  for (const link of links) await link.close();
});
let prefixCounter = 0;

/** A Redis owner store of one replica over the test's redis-server, under `prefix`. */
async function redisStore(prefix: string, timeoutMs = 1000): Promise<RedisResponseOwners> {
  const link = quietRedisLink(redis.server.url, RESPONSE_OWNER_SCRIPTS, timeoutMs, "owners");
  links.push(link);
  expect(await link.connected(10_000)).toBe(true);
  return new RedisResponseOwners(new ResponseOwners(new ManualClock(), SETTINGS), link, prefix, SETTINGS);
}

interface Kind {
  name: string;
  skip: boolean;
  make(): Promise<ResponseOwnerStore>;
}

const kinds: Kind[] = [
  {
    name: "memory",
    skip: false,
    make: () => Promise.resolve(new ResponseOwners(new ManualClock(), SETTINGS)),
  },
  { name: "redis", skip: redis.skip, make: () => redisStore(`own${prefixCounter++}:`) },
];

for (const kind of kinds) {
  describe.skipIf(kind.skip)(`ResponseOwnerStore contract: ${kind.name}`, () => {
    it("knows what it remembered, nothing it did not, and forgets on delete", async () => {
      const store = await kind.make();
      expect(await store.owner("resp_unknown")).toBeUndefined();
      await store.remember("resp_1", owner("e-0"));
      await store.remember("resp_2", owner("e-1", "session-7"));
      expect(await store.owner("resp_1")).toEqual(owner("e-0"));
      expect(await store.owner("resp_2")).toEqual(owner("e-1", "session-7"));
      store.forget("resp_1");
      expect(await store.owner("resp_1")).toBeUndefined();
      expect(store.size).toBe(1);
    });

    it("a later remember of the same id wins", async () => {
      const store = await kind.make();
      await store.remember("resp_1", owner("e-0"));
      await store.remember("resp_1", owner("e-2"));
      expect(await store.owner("resp_1")).toEqual(owner("e-2"));
    });
  });
}

describe.skipIf(redis.skip)("RedisResponseOwners across replicas", () => {
  it("an owner remembered on one replica is readable on every other once remember() resolved", async () => {
    const prefix = `own${prefixCounter++}:`;
    const [a, b, c] = [await redisStore(prefix), await redisStore(prefix), await redisStore(prefix)];
    for (let i = 0; i < 50; i++) {
      const writer = [a, b, c][i % 3]!;
      const reader = [a, b, c][(i + 1) % 3]!;
      await writer.remember(`resp_${i}`, owner(`e-${i % 4}`, `chain-${i}`));
      // No flush, no wait: read-your-writes is what remember() resolving means.
      expect(await reader.owner(`resp_${i}`)).toEqual(owner(`e-${i % 4}`, `chain-${i}`));
    }
    // What a replica read is kept in its local view (the next use costs no round trip).
    expect(b.size).toBeGreaterThanOrEqual(17);
    // A forget on one replica reaches the shared copy (other replicas' local views keep theirs until TTL).
    a.forget("resp_0");
    await a.flush();
    const fresh = await redisStore(prefix);
    expect(await fresh.owner("resp_0")).toBeUndefined();
    expect(await fresh.owner("resp_1")).toEqual(owner("e-1", "chain-1"));
  });

  it("fails open: with Redis unreachable a replica knows what it served, and writes what it knows back once Redis is back", async () => {
    const prefix = `own${prefixCounter++}:`;
    const store = await redisStore(prefix);
    const link = links.at(-1)!;
    await store.remember("resp_before", owner("e-1")); // written before Redis went away
    await redis.server.kill(); // Redis goes away (it comes back empty, on the same port)
    await store.remember("resp_offline", owner("e-3"));
    expect(await store.owner("resp_offline")).toEqual(owner("e-3"));
    expect(await store.owner("resp_never")).toBeUndefined();
    expect(store.pendingWrites).toBeGreaterThan(0);
    await redis.server.restart();
    expect(await link.connected(10_000)).toBe(true);
    await store.flush();
    const other = await redisStore(prefix);
    expect(await other.owner("resp_offline")).toEqual(owner("e-3"));
    // The restarted Redis was empty: what the replica knew from before is written again too.
    expect(await other.owner("resp_before")).toEqual(owner("e-1"));
  });
});
