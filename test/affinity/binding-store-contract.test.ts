// The BindingStore contract, run against each store directly: memory, and Redis (one store instance each).
import { describe, expect, it } from "vitest";
import { BROKEN, EXPIRED, type BindingEffect, type BindingStore } from "../../src/affinity/binding-store.js";
import { hashSession } from "../../src/affinity/rendezvous.js";
import { MemoryBindingStore } from "../../src/affinity/memory-bindings.js";
import { BINDING_SCRIPTS, RedisBindings } from "../../src/affinity/redis-bindings.js";
import { RedisBindingStore } from "../../src/affinity/redis-binding-store.js";
import { StickyTable } from "../../src/affinity/sticky-table.js";
import { RedisLink } from "../../src/store/redis-link.js";
import { quietRedisLink, useRedisServer } from "../helpers/redis-server.js";
import { TEST_HASH_KEY } from "./helpers.js";

const TTL_MS = 10_000;
const T0 = 1_000_000;
const TIER = "small";

interface Subject {
  store: BindingStore;
  /** Broken counts the store reported, in order. */
  broken: { tier: string; count: number }[];
  /** Waits until the store's writes have landed (a no-op for memory). */
  settle(): Promise<void>;
}

interface StoreKind {
  name: string;
  skip: boolean;
  make(): Promise<Subject>;
}

const redis = useRedisServer(async () => {
  for (const link of links) await link.close();
});
const links: RedisLink[] = [];
let prefixCounter = 0;

function observed(store: BindingStore, settle: () => Promise<void>): Subject {
  const broken: Subject["broken"] = [];
  store.onBroken((tier, count) => broken.push({ tier, count }));
  return { store, broken, settle };
}

const kinds: StoreKind[] = [
  {
    name: "memory",
    skip: false,
    make: () =>
      Promise.resolve(
        observed(new MemoryBindingStore(new StickyTable(1000, TEST_HASH_KEY)), () => Promise.resolve()),
      ),
  },
  {
    name: "redis",
    skip: redis.skip,
    make: async () => {
      const link = quietRedisLink(redis.server.url, BINDING_SCRIPTS, 1000, "bindings");
      links.push(link);
      expect(await link.connected(10_000)).toBe(true);
      const store = new RedisBindingStore({
        local: new StickyTable(1000, TEST_HASH_KEY),
        remote: new RedisBindings(link, `contract${prefixCounter++}:`, TTL_MS),
        stickyTtlMs: TTL_MS,
      });
      return observed(store, () => store.flush());
    },
  },
];

function bind(sessionId: string, backendId: string, expiresAtMs: number): BindingEffect {
  return { kind: "bind", sessionId, placement: hashSession(sessionId), backendId, expiresAtMs };
}

describe.each(kinds)("BindingStore contract: $name", (kind) => {
  it.skipIf(kind.skip)("knows nothing of a session never bound, and a bound one by its backend", async () => {
    const { store, settle } = await kind.make();
    expect(await store.lookup("s-never", T0, "peek")).toBeUndefined();
    await store.apply([bind("s-bound", "engine-0", T0 + TTL_MS)], T0);
    await settle();
    expect(await store.lookup("s-bound", T0 + 1, "peek")).toBe("engine-0");
    expect(await store.lookup("s-bound", T0 + 1, "route")).toBe("engine-0");
    expect(store.countFor("engine-0")).toBe(1);
  });

  it.skipIf(kind.skip)(
    "tells a lapsed binding from one never made, and a refresh keeps it live",
    async () => {
      const { store, settle } = await kind.make();
      await store.apply(
        [bind("s-lapses", "engine-0", T0 + TTL_MS), bind("s-kept", "engine-1", T0 + TTL_MS)],
        T0,
      );
      await store.apply(
        [{ kind: "refresh", sessionId: "s-kept", expiresAtMs: T0 + 5_000 + TTL_MS }],
        T0 + 5_000,
      );
      await settle();
      expect(await store.lookup("s-lapses", T0 + TTL_MS + 1, "peek")).toBe(EXPIRED);
      expect(await store.lookup("s-kept", T0 + TTL_MS + 1, "peek")).toBe("engine-1");
    },
  );

  it.skipIf(kind.skip)("breaks only a live binding to the named backend, and reports it once", async () => {
    const { store, broken, settle } = await kind.make();
    await store.apply([bind("s-break", "engine-0", T0 + TTL_MS)], T0);
    await store.apply([{ kind: "break", sessionId: "s-break", backendId: "engine-1", tier: TIER }], T0 + 1);
    await settle();
    expect(await store.lookup("s-break", T0 + 2, "peek")).toBe("engine-0");
    const breakIt: BindingEffect = { kind: "break", sessionId: "s-break", backendId: "engine-0", tier: TIER };
    await store.apply([breakIt], T0 + 3);
    await store.apply([breakIt], T0 + 4);
    await settle();
    expect(await store.lookup("s-break", T0 + 5, "peek")).toBe(BROKEN);
    expect(broken).toEqual([{ tier: TIER, count: 1 }]);
  });

  it.skipIf(kind.skip)(
    "applies a decision's effects in order: a break then a rebind moves the session",
    async () => {
      const { store, broken, settle } = await kind.make();
      await store.apply([bind("s-move", "engine-0", T0 + TTL_MS)], T0);
      await store.apply(
        [
          { kind: "break", sessionId: "s-move", backendId: "engine-0", tier: TIER },
          bind("s-move", "engine-2", T0 + 1_000 + TTL_MS),
        ],
        T0 + 1_000,
      );
      await settle();
      expect(await store.lookup("s-move", T0 + 1_001, "peek")).toBe("engine-2");
      expect(store.countFor("engine-0")).toBe(0);
      expect(store.countFor("engine-2")).toBe(1);
      expect(broken).toEqual([{ tier: TIER, count: 1 }]);
    },
  );

  it.skipIf(kind.skip)(
    "breaks exactly a backend's live bindings at once, counts them, and touches no other",
    async () => {
      const { store, broken, settle } = await kind.make();
      await store.apply(
        [
          bind("s-a1", "engine-0", T0 + TTL_MS),
          bind("s-a2", "engine-0", T0 + TTL_MS),
          bind("s-a-lapsed", "engine-0", T0 + 100),
          bind("s-b1", "engine-1", T0 + TTL_MS),
        ],
        T0,
      );
      await settle();
      expect(await store.breakBackend("engine-0", TIER, T0 + 1_000)).toBe(2);
      await settle();
      expect(broken).toEqual([{ tier: TIER, count: 2 }]);
      expect(await store.lookup("s-a1", T0 + 1_001, "peek")).toBe(BROKEN);
      expect(await store.lookup("s-a2", T0 + 1_001, "peek")).toBe(BROKEN);
      expect(await store.lookup("s-b1", T0 + 1_001, "peek")).toBe("engine-1");
      expect(store.countFor("engine-0")).toBe(0);
    },
  );

  it.skipIf(kind.skip)("sweeps lapsed bindings without ever dropping a live one", async () => {
    const { store, settle } = await kind.make();
    await store.apply([bind("s-old", "engine-0", T0 + 100), bind("s-live", "engine-0", T0 + TTL_MS)], T0);
    await settle();
    expect(await store.sweep(T0 + 1_000, 10)).toBe(1);
    expect(await store.lookup("s-live", T0 + 1_000, "peek")).toBe("engine-0");
    expect(store.countFor("engine-0")).toBe(1);
  });

  it.skipIf(kind.skip)("has a lifecycle: connected, configured, flushed, then closed", async () => {
    const { store } = await kind.make();
    expect(await store.connected(5_000)).toBe(true);
    store.configure(TTL_MS * 2);
    await store.apply([bind("s-life", "engine-0", T0 + TTL_MS)], T0);
    await store.flush();
    expect(await store.lookup("s-life", T0 + 1, "peek")).toBe("engine-0");
    await store.close();
  });
});
