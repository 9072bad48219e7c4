// One contract for both receipt memories (in-process and Redis), plus the in-process bounds and Redis failing open.
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/core/clock.js";
import {
  InMemoryReceipts,
  RECENT_RECEIPTS,
  nextEntry,
  type ReceiptMemory,
} from "../../src/receipts/receipt-memory.js";
import { RECEIPT_SCRIPTS, RedisReceipts } from "../../src/receipts/redis-receipts.js";
import type { Receipt, TurnRecord } from "../../src/receipts/receipt-rules.js";
import { quietRedisLink, useRedisServer } from "../helpers/redis-server.js";

const redis = useRedisServer(async () => {
  for (const memory of opened) await memory.close();
});
const opened: ReceiptMemory[] = [];
let prefixCounter = 0;

function record(atMs: number, backendId = "a"): TurnRecord {
  return {
    items: 2,
    chain: "00ff00ff00ff00ff",
    promptTokens: 100,
    tokens: 120,
    backendId,
    tier: "small",
    atMs,
  };
}
function receipt(atMs: number): Receipt {
  return {
    reusableTokens: 96,
    cachedTokens: 96,
    lostTokens: 0,
    lostCause: "none",
    backendId: "a",
    tier: "small",
    atMs,
  };
}

async function redisMemories(n: number, url = redis.server.url): Promise<ReceiptMemory[]> {
  const keyPrefix = `r${prefixCounter++}:`;
  const memories: RedisReceipts[] = [];
  for (let i = 0; i < n; i++) {
    const link = quietRedisLink(url, RECEIPT_SCRIPTS, 200, "receipts");
    const memory = new RedisReceipts(link, keyPrefix, 60_000);
    opened.push(memory);
    memories.push(memory);
    await link.connected(1000);
  }
  return memories;
}

const kinds = [
  {
    name: "memory",
    skip: false,
    replicas: (n: number): Promise<ReceiptMemory[]> => {
      const memory = new InMemoryReceipts(100, 60_000, () => 0);
      return Promise.resolve(Array.from({ length: n }, () => memory));
    },
  },
  { name: "redis", skip: redis.skip, replicas: (n: number) => redisMemories(n) },
];

describe.each(kinds)("receipt memory contract: $name", ({ skip, replicas }) => {
  it.skipIf(skip)(
    "answers undefined for an unknown session and what was written for a known one, on every replica",
    async () => {
      const [one, two, three] = await replicas(3);
      expect(await one!.read("s1")).toBeUndefined();
      const entry = nextEntry(undefined, record(1), receipt(1));
      one!.write("s1", entry);
      await one!.flush();
      expect(await two!.read("s1")).toEqual(entry);
      expect(await three!.read("s1")).toEqual(entry);
      expect(await three!.read("s2")).toBeUndefined();
    },
  );

  it.skipIf(skip)("keeps the last RECENT_RECEIPTS receipts, oldest first", async () => {
    const [memory] = await replicas(1);
    let entry = undefined;
    for (let turn = 1; turn <= RECENT_RECEIPTS + 3; turn++) {
      entry = nextEntry(entry, record(turn), receipt(turn));
      memory!.write("s", entry);
    }
    await memory!.flush();
    const read = await memory!.read("s");
    expect(read?.receipts.map((r) => r.atMs)).toEqual(
      Array.from({ length: RECENT_RECEIPTS }, (_, i) => i + 4),
    );
    expect(read?.last.atMs).toBe(RECENT_RECEIPTS + 3);
  });
});

describe("InMemoryReceipts", () => {
  it("forgets the least recently used session past its bound, and entries past their TTL", async () => {
    // lru-cache takes a start time of 0 for "never set": the clock starts later.
    const clock = new ManualClock(10_000);
    const memory = new InMemoryReceipts(2, 1000, () => clock.nowMs());
    for (const key of ["a", "b", "c"]) memory.write(key, nextEntry(undefined, record(0), receipt(0)));
    expect(await memory.read("a")).toBeUndefined();
    expect(await memory.read("b")).toBeDefined();
    clock.advance(1001);
    expect(await memory.read("c")).toBeUndefined();
  });
});

describe("RedisReceipts", () => {
  it.skipIf(redis.skip)(
    "fails open: with Redis unreachable a read answers undefined and a write is dropped",
    async () => {
      const [memory] = await redisMemories(1, "redis://127.0.0.1:1/0");
      memory!.write("s", nextEntry(undefined, record(0), receipt(0)));
      await memory!.flush();
      expect(await memory!.read("s")).toBeUndefined();
    },
  );

  it.skipIf(redis.skip)("reads a stored value it does not understand as no entry", async () => {
    const [memory] = await redisMemories(1);
    memory!.write("s", { last: { bogus: true }, receipts: [] } as never);
    await memory!.flush();
    expect(await memory!.read("s")).toBeUndefined();
  });
});
