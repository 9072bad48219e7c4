// The fail-open Redis link against a real redis-server: commands of one event-loop turn leave in one write.
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { LuaScript } from "../../src/store/redis-link.js";
import { quietRedisLink, useRedisServer } from "../helpers/redis-server.js";

const redis = useRedisServer();

const INCR = new LuaScript("return redis.call('INCR', KEYS[1])", 1);

/** Reads redis-server has done from its clients' sockets (INFO stats), one per batch of bytes it received. */
async function readsProcessed(admin: Redis): Promise<number> {
  return Number(/total_reads_processed:(\d+)/.exec(await admin.info("stats"))![1]);
}

describe.skipIf(redis.skip)("redis link", () => {
  it("sends the commands issued in one turn of the event loop in one write, in order", async () => {
    const link = quietRedisLink(redis.server.url, [INCR], 2000);
    const admin = new Redis(redis.server.url);
    try {
      expect(await link.connected(10_000)).toBe(true);
      const before = await readsProcessed(admin); // this INFO is one read of its own
      const replies = await Promise.all(Array.from({ length: 50 }, () => link.run(INCR, ["n"], [])));
      const after = await readsProcessed(admin);
      expect(replies).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
      // 50 writes would reach redis-server in many reads; one write arrives in one (or, split, two).
      expect(after - before - 1).toBeLessThanOrEqual(2);
    } finally {
      admin.disconnect();
      await link.close();
    }
  });
});
