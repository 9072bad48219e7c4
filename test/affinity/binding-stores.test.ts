// The shared binding store across replicas, each replica with its own store instance and placement service.
import { describe, expect, it } from "vitest";
import { createBalancer } from "../../src/affinity/balancers.js";
import type { BindingStore } from "../../src/affinity/binding-store.js";
import { BINDING_SCRIPTS, RedisBindings } from "../../src/affinity/redis-bindings.js";
import { MemoryBindingStore } from "../../src/affinity/memory-bindings.js";
import { PlacementService } from "../../src/affinity/placement-service.js";
import { RedisBindingStore } from "../../src/affinity/redis-binding-store.js";
import { hashSession, rendezvousRanking } from "../../src/affinity/rendezvous.js";
import { StickyTable } from "../../src/affinity/sticky-table.js";
import { ManualClock } from "../../src/core/clock.js";
import { SeededRandom } from "../../src/core/random.js";
import { RedisLink } from "../../src/store/redis-link.js";
import { RedisSubscription } from "../../src/store/redis-subscription.js";
import { quietRedisLink, useRedisServer } from "../helpers/redis-server.js";
import { eventsOf, waitUntil } from "../helpers/wait.js";
import { candidates, CountingRecorder, type TestCandidate } from "./helpers.js";

const TIER = "small";
const TTL_SECONDS = 10;

/** One gateway replica as far as bindings go: its placement service and store, its own view of backend health. */
interface Replica {
  scheduler: PlacementService;
  backends: TestCandidate[];
  /** Waits for this replica's write-backs. */
  flush(): Promise<void>;
  shared: RedisBindingStore;
  link: RedisLink;
  subscription?: RedisSubscription;
}

interface Fleet {
  replicas: Replica[];
  clock: ManualClock;
  /** broken_total summed over the replicas. */
  recorder: CountingRecorder;
}

interface StoreKind {
  name: string;
  fleet(n: number): Fleet;
}

const redis = useRedisServer(async () => {
  for (const subscription of subscriptions) await subscription.close();
  for (const link of links) await link.close();
});
let prefixCounter = 0;
const links: RedisLink[] = [];
const subscriptions: RedisSubscription[] = [];
let markerCounter = 0;
let hashKeySeed = 1;

/** One replica's placement service on `store`. */
function placementService(store: BindingStore, clock: ManualClock, recorder: CountingRecorder) {
  return new PlacementService({
    store,
    clock,
    balancer: createBalancer("least_inflight", new SeededRandom(1)),
    recorder,
    stickyTtlMs: TTL_SECONDS * 1000,
    // Plain rendezvous: these tests are about where bindings live, not about load (placement's suite).
    loadFactor: 0,
    sessionless: "balancer",
  });
}

function makeBackends(): TestCandidate[] {
  return candidates(4);
}

/**
 * With `invalidations`, every replica trusts the bindings it confirmed until the channel says otherwise (the
 * gateway's setting). Its flush() then also waits until every replica has read everything announced so far:
 * a marker published after the writes reaches each subscriber after their announcements.
 */
function redisFleet(n: number, invalidations = false): Fleet {
  const clock = new ManualClock(1_000_000);
  const recorder = new CountingRecorder();
  const prefix = `c${prefixCounter++}:`;
  const markerWaits = new Map<string, (() => void)[]>();
  const all: Replica[] = [];
  const barrier = async (link: RedisLink, channel: string): Promise<void> => {
    const marker = `m${markerCounter++}`;
    const seen = all.map(
      () =>
        new Promise<void>((resolve) => {
          const waits = markerWaits.get(marker) ?? [];
          waits.push(resolve);
          markerWaits.set(marker, waits);
        }),
    );
    await link.client.publish(channel, marker);
    await Promise.all(seen);
    markerWaits.delete(marker);
  };
  const replicas = Array.from({ length: n }, (): Replica => {
    const backends = makeBackends();
    const link = quietRedisLink(redis.server.url, BINDING_SCRIPTS, 500, "bindings");
    links.push(link);
    const remote = new RedisBindings(link, prefix, TTL_SECONDS * 1000);
    const shared = new RedisBindingStore({
      local: new StickyTable(10_000, [hashKeySeed++, 7]),
      remote,
      stickyTtlMs: TTL_SECONDS * 1000,
    });
    const scheduler = placementService(shared, clock, recorder);
    let subscription: RedisSubscription | undefined;
    if (invalidations) {
      subscription = new RedisSubscription(
        redis.server.url,
        remote.invalidationChannel,
        (message) => {
          shared.invalidate(message);
          for (const resolve of markerWaits.get(message)?.splice(0, 1) ?? []) resolve();
        },
        () => shared.forgetConfirmed(),
      );
      subscriptions.push(subscription);
      shared.useInvalidations(subscription);
    }
    const replica: Replica = {
      scheduler,
      backends,
      flush: async () => {
        await shared.flush();
        if (invalidations) await barrier(link, remote.invalidationChannel);
      },
      shared,
      link,
      subscription,
    };
    all.push(replica);
    return replica;
  });
  return { replicas, clock, recorder };
}

// The memory store is not shared (each replica decides alone: see the last test), so only Redis is here.
const kinds: StoreKind[] = [
  { name: "redis", fleet: (n) => redisFleet(n) },
  { name: "redis, confirmed bindings cached", fleet: (n) => redisFleet(n, true) },
];

async function connected(fleet: Fleet): Promise<void> {
  for (const replica of fleet.replicas) {
    expect(await replica.link.connected(10_000)).toBe(true);
    await replica.subscription?.whenLive();
  }
}

/** One turn of a session on one replica, as the request path runs it. */
async function turn(replica: Replica, sessionId: string, exclude: ReadonlySet<string> = new Set()) {
  const selection = await replica.scheduler.place(sessionId, TIER, replica.backends, exclude);
  await replica.flush();
  return selection;
}

function winnerOf(sessionId: string, backends: readonly TestCandidate[]): TestCandidate {
  return rendezvousRanking(hashSession(sessionId), backends)[0]!;
}

function setState(replica: Replica, backendId: string, state: TestCandidate["state"]): void {
  replica.backends.find((b) => b.id === backendId)!.state = state;
}

describe.skipIf(redis.skip).each(kinds)("binding store across replicas: $name", (kind) => {
  it("keeps one binding per session: every replica follows it, not its own hash", async () => {
    const fleet = kind.fleet(3);
    await connected(fleet);
    const [a, b, c] = fleet.replicas as [Replica, Replica, Replica];
    const session = "session-one-binding";
    const winner = winnerOf(session, a.backends);
    setState(a, winner.id, "down"); // only replica a sees the winner down, so a binds elsewhere
    const first = await turn(a, session);
    expect(first!.backend.id).not.toBe(winner.id);
    setState(a, winner.id, "up");
    for (const replica of [b, c, a]) {
      const next = await turn(replica, session);
      expect(next).toMatchObject({ affinityHit: true, reason: "affinity_hit" });
      expect(next!.backend.id).toBe(first!.backend.id);
    }
    expect(fleet.recorder.totals(TIER)).toEqual({ hits: 3, misses: 1, broken: 0 });
  });

  it("slides the TTL for whichever replica serves the turn", async () => {
    const fleet = kind.fleet(3);
    await connected(fleet);
    const [a, b, c] = fleet.replicas as [Replica, Replica, Replica];
    const first = await turn(a, "s-ttl");
    fleet.clock.advance(6_000);
    expect((await turn(b, "s-ttl"))!.affinityHit).toBe(true); // refreshed until 16 s
    fleet.clock.advance(6_000);
    expect((await turn(c, "s-ttl"))!.backend.id).toBe(first!.backend.id); // 12 s: alive only by b's refresh
    fleet.clock.advance(TTL_SECONDS * 1000 + 1);
    expect(await turn(a, "s-ttl")).toMatchObject({ affinityHit: false, reason: "rebind_expired" });
  });

  it("breaks a binding once when one replica's request fails, and every replica moves", async () => {
    const fleet = kind.fleet(3);
    await connected(fleet);
    const [a, b, c] = fleet.replicas as [Replica, Replica, Replica];
    const session = "s-fail";
    const pinned = (await turn(a, session))!.backend.id;
    await b.scheduler.onAttemptFailed(session, TIER, pinned); // the engine failed b's attempt
    await b.flush();
    const retry = await turn(b, session, new Set([pinned]));
    expect(retry).toMatchObject({ affinityHit: false, reason: "failover" });
    expect(retry!.backend.id).not.toBe(pinned);
    // a and c follow the move (the binding is to the failover backend now), and nobody counts it again.
    for (const replica of [c, a]) {
      const next = await turn(replica, session);
      expect(next).toMatchObject({ affinityHit: true, backend: { id: retry!.backend.id } });
    }
    expect(fleet.recorder.totals(TIER).broken).toBe(1);
  });

  it("says rebind_backend_down on another replica after a failure broke the binding", async () => {
    const fleet = kind.fleet(2);
    await connected(fleet);
    const [a, b] = fleet.replicas as [Replica, Replica];
    const pinned = (await turn(a, "s-broken"))!.backend.id;
    await a.scheduler.onAttemptFailed("s-broken", TIER, pinned);
    await a.flush();
    setState(b, pinned, "down");
    const next = await turn(b, "s-broken");
    expect(next).toMatchObject({ affinityHit: false, reason: "rebind_backend_down" });
    expect(fleet.recorder.totals(TIER).broken).toBe(1);
  });

  it("counts a backend's outage once over the replicas: exactly the bindings it held", async () => {
    const fleet = kind.fleet(3);
    await connected(fleet);
    const sessions = Array.from({ length: 60 }, (_, i) => `s-outage-${i}`);
    const bound = new Map<string, string>();
    for (const [i, session] of sessions.entries()) {
      bound.set(session, (await turn(fleet.replicas[i % 3]!, session))!.backend.id);
    }
    // Five of them lapse before the outage: not bindings it broke.
    const dead = "engine-1";
    const heldLive = sessions.filter((s) => bound.get(s) === dead);
    expect(heldLive.length).toBeGreaterThan(5);
    fleet.clock.advance(5_000);
    for (const session of sessions)
      if (!heldLive.slice(0, 5).includes(session)) await turn(fleet.replicas[0]!, session);
    fleet.clock.advance(6_000); // the five not refreshed at 5 s lapse at 10 s
    for (const replica of fleet.replicas) {
      setState(replica, dead, "down");
      await replica.scheduler.onBackendDown(dead, TIER);
      await replica.flush();
    }
    expect(fleet.recorder.totals(TIER).broken).toBe(heldLive.length - 5);
    for (const [i, session] of sessions.entries()) {
      const next = await turn(fleet.replicas[(i + 1) % 3]!, session);
      if (bound.get(session) === dead) {
        expect(next!.backend.id).not.toBe(dead);
        expect(next!.affinityHit).toBe(false);
      } else {
        expect(next).toMatchObject({ affinityHit: true, backend: { id: bound.get(session) } });
      }
    }
    expect(fleet.recorder.totals(TIER).broken).toBe(heldLive.length - 5);
  });
});

describe.skipIf(redis.skip)("redis binding store fails open", () => {
  it("routes on the local table while Redis is dead, and writes the bindings made meanwhile back", async () => {
    const fleet = redisFleet(2);
    await connected(fleet);
    const [a, b] = fleet.replicas as [Replica, Replica];
    const before = (await turn(a, "s-before"))!.backend.id;
    await redis.server.kill();
    // Dead Redis: decisions are local and immediate; nothing throws or waits for the timeout.
    expect((await turn(a, "s-before"))!.backend.id).toBe(before);
    const winner = winnerOf("s-during", a.backends);
    setState(a, winner.id, "down");
    const during = (await turn(a, "s-during"))!.backend.id; // not the rendezvous winner
    setState(a, winner.id, "up");
    expect(during).not.toBe(winner.id);
    expect(a.shared.shared).toBe(false);
    expect(a.shared.pendingWrites).toBeGreaterThan(0);
    await redis.server.restart(); // empty
    expect(await a.link.connected(10_000)).toBe(true);
    expect(await b.link.connected(10_000)).toBe(true);
    await a.flush();
    expect(a.shared.pendingWrites).toBe(0);
    // b never saw s-during, and its own hash says otherwise: it follows the written-back binding.
    expect(await turn(b, "s-during")).toMatchObject({ affinityHit: true, backend: { id: during } });
    expect(await turn(b, "s-before")).toMatchObject({ affinityHit: true, backend: { id: before } });
  }, 30_000);

  it("never lets a replayed older write overwrite a newer binding", async () => {
    const fleet = redisFleet(2);
    await connected(fleet);
    const [a, b] = fleet.replicas as [Replica, Replica];
    const session = "s-order";
    const winner = winnerOf(session, a.backends);
    // a binds at t=0 to a non-winner while the Redis link of a is held back (its write queued)...
    const client = a.link.client;
    const ended = waitUntil("the link of a to end", () => client.status === "end" && !a.link.up, [
      eventsOf(client, "close"),
      eventsOf(client, "end"),
    ]);
    client.disconnect();
    await ended;
    expect(a.link.up).toBe(false);
    setState(a, winner.id, "down");
    const old = (await turn(a, session))!.backend.id;
    setState(a, winner.id, "up");
    fleet.clock.advance(1000);
    // ...b binds later (t=1 s) to the winner; then a's queued write arrives: the newer binding stays.
    const newer = (await turn(b, session))!.backend.id;
    expect(newer).toBe(winner.id);
    expect(old).not.toBe(newer);
    await a.link.client.connect();
    expect(await a.link.connected(10_000)).toBe(true);
    await a.flush();
    expect(a.shared.pendingWrites).toBe(0);
    expect(await turn(a, session)).toMatchObject({ affinityHit: true, backend: { id: newer } });
  }, 30_000);
});

describe.skipIf(redis.skip)("redis binding store under a burst", () => {
  it("keeps the load bound for sessions placed while their binding writes are under way", async () => {
    const fleet = redisFleet(1);
    await connected(fleet);
    const replica = fleet.replicas[0]!;
    const bounded = new PlacementService({
      store: replica.shared,
      clock: fleet.clock,
      balancer: createBalancer("least_inflight", new SeededRandom(1)),
      recorder: fleet.recorder,
      stickyTtlMs: TTL_SECONDS * 1000,
      loadFactor: 1.25,
      sessionless: "balancer",
    });
    // Eight new sessions whose rendezvous winner is engine-0, placed at once (a burst of sub-agents).
    const sessions: string[] = [];
    for (let i = 0; sessions.length < 8; i++)
      if (winnerOf(`burst-${i}`, replica.backends).id === "engine-0") sessions.push(`burst-${i}`);
    const chosen = await Promise.all(sessions.map((id) => bounded.place(id, TIER, replica.backends)));
    const perEngine = new Map<string, number>();
    for (const selection of chosen) {
      const id = selection!.backend.id;
      perEngine.set(id, (perEngine.get(id) ?? 0) + 1);
    }
    // ceil(1.25 x 8 / 4) = 3 for the last of them: none of the four takes more.
    expect(Math.max(...perEngine.values())).toBeLessThanOrEqual(3);
    expect(replica.backends.every((b) => (b.placing ?? 0) === 0)).toBe(true);
    await replica.flush();
  });
});

describe.skipIf(redis.skip)("redis binding store hot path", () => {
  /** EVALSHA calls redis-server has run so far (INFO commandstats): every store operation is one script. */
  async function scriptCalls(link: RedisLink): Promise<number> {
    const stats = await link.client.info("commandstats");
    return Number(/cmdstat_evalsha:calls=(\d+)/.exec(stats)?.[1] ?? 0);
  }

  it("with invalidations, a confirmed binding's turns cost no command until another replica moves it", async () => {
    const fleet = redisFleet(2, true);
    await connected(fleet);
    const [a, b] = fleet.replicas as [Replica, Replica];
    const session = "s-cached";
    const pinned = (await turn(a, session))!.backend.id; // a bind: a's own write announces a change
    await turn(a, session); // the lookup finds it live: confirmed
    expect(a.shared.confirmedCount).toBe(1);
    const before = await scriptCalls(a.link);
    for (let i = 0; i < 3; i++) {
      fleet.clock.advance(30); // 90 ms in all, within the refresh tolerance (TTL/100): nothing to write
      expect(await turn(a, session)).toMatchObject({ affinityHit: true, backend: { id: pinned } });
    }
    expect((await scriptCalls(a.link)) - before).toBe(0);
    // b's attempt on the pinned engine fails: b breaks and moves the session; a hears it and follows.
    await b.scheduler.onAttemptFailed(session, TIER, pinned);
    const moved = (await turn(b, session, new Set([pinned])))!.backend.id;
    expect(moved).not.toBe(pinned);
    expect(a.shared.confirmedCount).toBe(0);
    expect(await turn(a, session)).toMatchObject({ affinityHit: true, backend: { id: moved } });
    expect(fleet.recorder.totals(TIER).broken).toBe(1);
  });

  it("with invalidations, a dropped subscription forgets every confirmation (messages may be lost)", async () => {
    const fleet = redisFleet(1, true);
    await connected(fleet);
    const [a] = fleet.replicas as [Replica];
    await turn(a, "s-dropped");
    await turn(a, "s-dropped");
    expect(a.shared.confirmedCount).toBe(1);
    const forgotten = new Promise<void>((resolve) => {
      const poll = (): void => void (a.shared.confirmedCount === 0 ? resolve() : setImmediate(poll));
      poll();
    });
    await a.link.client.client("KILL", "TYPE", "pubsub");
    await forgotten;
    await a.subscription!.whenLive(); // it subscribes again by itself
    const before = await scriptCalls(a.link);
    await turn(a, "s-dropped");
    expect((await scriptCalls(a.link)) - before).toBe(1); // looked up again, and confirmed again
    expect(a.shared.confirmedCount).toBe(1);
  });

  it("serves a hit with one command: the lookup slides the TTL, the refresh is not written again", async () => {
    const fleet = redisFleet(2);
    await connected(fleet);
    const [a, b] = fleet.replicas as [Replica, Replica];
    const first = (await turn(a, "s-one-command"))!.backend.id;
    fleet.clock.advance(6_000);
    const before = await scriptCalls(b.link);
    expect(await turn(b, "s-one-command")).toMatchObject({ affinityHit: true, backend: { id: first } });
    expect((await scriptCalls(b.link)) - before).toBe(1);
    // ...and that one command did slide it: alive at 15 s only because of b's turn at 6 s.
    fleet.clock.advance(9_000);
    expect(await turn(a, "s-one-command")).toMatchObject({ affinityHit: true, backend: { id: first } });
  });

  it("still writes the refresh of a turn routed long after its lookup", async () => {
    const fleet = redisFleet(2);
    await connected(fleet);
    const [a, b] = fleet.replicas as [Replica, Replica];
    const first = (await turn(a, "s-slow-route"))!.backend.id;
    fleet.clock.advance(5_000);
    const binding = await b.scheduler.lookup("s-slow-route"); // slides it until 15 s
    fleet.clock.advance(2_000); // something slow (the classifier) ran between lookup and placement
    const selection = await b.scheduler.place(
      "s-slow-route",
      TIER,
      b.backends,
      undefined,
      undefined,
      binding,
    );
    expect(selection!.affinityHit).toBe(true);
    await b.flush();
    fleet.clock.advance(8_500); // 15.5 s: alive only by the refresh at 7 s
    expect(await turn(a, "s-slow-route")).toMatchObject({ affinityHit: true, backend: { id: first } });
  });

  it("lets the admin view read a binding without refreshing it", async () => {
    const fleet = redisFleet(2);
    await connected(fleet);
    const [a, b] = fleet.replicas as [Replica, Replica];
    await turn(a, "s-peek");
    fleet.clock.advance(6_000);
    expect(await b.scheduler.boundBackend("s-peek")).toBeDefined();
    fleet.clock.advance(4_001); // 10 s after the only turn
    expect(await turn(b, "s-peek")).toMatchObject({ affinityHit: false, reason: "rebind_expired" });
  });

  it("lets Redis collect a binding a TTL after it lapses (its key's PX is relative)", async () => {
    const fleet = redisFleet(1);
    await connected(fleet);
    const [a] = fleet.replicas as [Replica];
    await turn(a, "s-collected"); // bound until 10 s from now, readable as lapsed for 10 s more
    const client = a.link.client;
    const [key] = await client.keys("*b:s-collected");
    const pttlMs = await client.pttl(key!);
    expect(pttlMs).toBeGreaterThan(0);
    expect(pttlMs).toBeLessThanOrEqual(2 * TTL_SECONDS * 1000);
  });
});

describe("memory binding store across replicas", () => {
  it("is not shared: each replica's store decides alone (affinity.store kind memory is for one replica)", async () => {
    const clock = new ManualClock(1_000_000);
    const recorder = new CountingRecorder();
    const [a, b] = Array.from({ length: 2 }, () => ({
      backends: makeBackends(),
      scheduler: placementService(
        new MemoryBindingStore(new StickyTable(10_000, [hashKeySeed++, 7])),
        clock,
        recorder,
      ),
    }));
    const session = "s-memory";
    const winner = winnerOf(session, a!.backends);
    a!.backends.find((x) => x.id === winner.id)!.state = "down";
    const first = await a!.scheduler.place(session, TIER, a!.backends);
    expect(first!.backend.id).not.toBe(winner.id);
    // b never heard of a's binding: its own first sight, its own rendezvous winner.
    expect(await b!.scheduler.place(session, TIER, b!.backends)).toMatchObject({
      reason: "new_session",
      backend: { id: winner.id },
    });
  });
});
