// growingLru: capped at its entry count, least recently used forgotten first, whatever the cap's size.
import { describe, expect, it } from "vitest";
import { growingLru } from "../../src/core/growing-lru.js";

describe("growingLru", () => {
  it("holds at most maxEntries, forgetting the least recently used first", () => {
    const cache = growingLru<string, number>(3);
    for (const [key, value] of [
      ["a", 1],
      ["b", 2],
      ["c", 3],
    ] as const)
      cache.set(key, value);
    expect(cache.get("a")).toBe(1); // a is now the most recently used
    cache.set("d", 4);
    expect(cache.size).toBe(3);
    expect(cache.has("b")).toBe(false);
    expect([...cache.keys()].sort()).toEqual(["a", "c", "d"]);
  });

  it("takes a cap of 100 million without allocating for it", () => {
    const cache = growingLru<string, number>(100_000_000);
    for (let i = 0; i < 1000; i++) cache.set(`k${i}`, i);
    expect(cache.size).toBe(1000);
    expect(cache.get("k0")).toBe(0);
  });

  it("expires entries on the injected clock", () => {
    let now = 1000; // lru-cache reads a start time of 0 as "none"
    const cache = growingLru<string, number>(10, { ttl: 100, ttlResolution: 0, perf: { now: () => now } });
    cache.set("a", 1);
    now = 1099;
    expect(cache.get("a")).toBe(1);
    now = 1101;
    expect(cache.get("a")).toBeUndefined();
  });
});
