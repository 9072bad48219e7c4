// The one write-behind queue against a real redis-server: in order, queued while Redis is away, replayed once back.
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { LuaScript, RedisLink } from "../../src/store/redis-link.js";
import { WriteBehind } from "../../src/store/write-behind.js";
import { quietRedisLink, useRedisServer } from "../helpers/redis-server.js";
import { eventsOf, waitUntil } from "../helpers/wait.js";

const redis = useRedisServer();

/** Appends ARGV[1] to the list KEYS[1]; replies with the list's new length. */
const APPEND = new LuaScript("return redis.call('RPUSH', KEYS[1], ARGV[1])", 1);

interface Write {
  key: string;
  value: string;
}

function queueOn(link: RedisLink, maxPending: number) {
  const queued: string[] = [];
  const written: { value: string; reply: unknown; queuedBefore: boolean }[] = [];
  const writes = new WriteBehind<Write>({
    link,
    maxPending,
    call: ({ key, value }) => ({ script: APPEND, keys: [key], args: [value] }),
    onQueued: ({ value }) => queued.push(value),
    onWritten: ({ value }, reply, queuedBefore) => written.push({ value, reply, queuedBefore }),
  });
  return { writes, queued, written };
}

describe.skipIf(redis.skip)("write-behind queue", () => {
  it("sends writes in order without waiting, and reports each reply", async () => {
    const link = quietRedisLink(redis.server.url, [APPEND], 2000);
    const admin = new Redis(redis.server.url);
    try {
      expect(await link.connected(10_000)).toBe(true);
      const { writes, queued, written } = queueOn(link, 10);
      for (const value of ["a", "b", "c"]) writes.submit({ key: "in-order", value });
      await writes.flush();
      expect(await admin.lrange("in-order", 0, -1)).toEqual(["a", "b", "c"]);
      expect(written).toEqual([
        { value: "a", reply: 1, queuedBefore: false },
        { value: "b", reply: 2, queuedBefore: false },
        { value: "c", reply: 3, queuedBefore: false },
      ]);
      expect(queued).toEqual([]);
      expect(writes.size).toBe(0);
    } finally {
      admin.disconnect();
      await link.close();
    }
  });

  it("queues while Redis is away (told once per write, the oldest dropped past the cap) and replays in order", async () => {
    const link = quietRedisLink(redis.server.url, [APPEND], 2000);
    const admin = new Redis(redis.server.url, { lazyConnect: true });
    try {
      expect(await link.connected(10_000)).toBe(true);
      const { writes, queued, written } = queueOn(link, 3);
      const down = waitUntil("the link to drop", () => !link.up, [
        eventsOf(link.client, "close"),
        eventsOf(link.client, "error"),
      ]);
      await redis.server.kill();
      await down;
      for (const value of ["1", "2", "3", "4"]) writes.submit({ key: "replayed", value });
      expect(writes.size).toBe(3); // "1" dropped: the cap is 3
      expect(queued).toEqual(["1", "2", "3", "4"]);
      await redis.server.restart(); // empty
      expect(await link.connected(10_000)).toBe(true);
      await writes.flush();
      expect(writes.size).toBe(0);
      await admin.connect();
      expect(await admin.lrange("replayed", 0, -1)).toEqual(["2", "3", "4"]);
      expect(written.map((w) => [w.value, w.queuedBefore])).toEqual([
        ["2", true],
        ["3", true],
        ["4", true],
      ]);
      expect(queued).toHaveLength(4); // a replayed write is not told again
    } finally {
      admin.disconnect();
      await link.close();
    }
  }, 30_000);
});
