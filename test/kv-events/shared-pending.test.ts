// Shared pending sends (src/kv-events/shared-pending.ts, redis-pending-share.ts): the message codec, pending entries
// known from an anchor on, an engine's recency order walked by parents, and two replicas' views telling each other
// their sends through a real redis-server on loopback.
import { afterEach, describe, expect, it } from "vitest";
import { XPublisher } from "zeromq";
import { ManualClock, ManualTimers, type Timers } from "../../src/core/clock.js";
import { GatewayError } from "../../src/core/errors.js";
import { EngineIndex } from "../../src/kv-events/engine-index.js";
import { KvCacheView, SHARED_SEND_HEAD_START_MS } from "../../src/kv-events/kv-cache-view.js";
import { PendingBlocks } from "../../src/kv-events/pending-blocks.js";
import { promptBlocksOf, type PromptBlocks } from "../../src/kv-events/prompt-blocks.js";
import { shareKvPendingOverRedis } from "../../src/kv-events/redis-pending-share.js";
import {
  decodeSharedPending,
  encodeSharedPending,
  type SharedSend,
} from "../../src/kv-events/shared-pending.js";
import { encodeKvEventBatch, encodeSeq } from "../../src/kv-events/wire.js";
import { useRedisServer } from "../helpers/redis-server.js";
import { storedEvent } from "./stored-event.js";

const SIZE = 16;
/** The first send of another replica a view heard, at time 0. */
const FIRST_HEARD = { order: 1, atMs: 0 };

/** A prompt of `blocks` full blocks: `stem` tokens from the common stem, the rest its own. */
function prompt(blocks: number, stem: number, own: number): PromptBlocks {
  const tokens = Array.from({ length: blocks * SIZE + 1 }, (_, i) => (i < stem ? 7 + i : 100_000 * own + i));
  return promptBlocksOf(tokens, SIZE, undefined);
}

/** A prompt placed, announced to the other replicas and sent, as the gateway does with a shared Redis. */
async function announceAndSend(view: KvCacheView, backendId: string, blocks: PromptBlocks) {
  const placed = view.place(backendId, blocks)!;
  await placed.announce();
  placed.markSent();
  return placed.release;
}

/** What replica "r1" tells of sending `blocks` after finding the first `offset` held. */
function sendOf(blocks: PromptBlocks, offset: number, id = 1): SharedSend {
  return {
    kind: "sent",
    replica: "r1",
    id,
    engine: "e1",
    offset,
    anchor: offset === 0 ? undefined : blocks.keys[offset - 1],
    tailKeys: Array.from(blocks.keys.subarray(offset)),
    promptTokens: blocks.promptTokens,
    blockSizeTokens: SIZE,
  };
}

describe("the shared pending-send messages", () => {
  it("round-trip a send and an end, keys exact", () => {
    const send = sendOf(prompt(6, 3 * SIZE, 1), 2);
    expect(decodeSharedPending(encodeSharedPending(send))).toEqual(send);
    const first = sendOf(prompt(3, 0, 2), 0);
    expect(decodeSharedPending(encodeSharedPending(first))).toEqual(first);
    const end = { kind: "ended", replica: "r1", id: 7, engine: "e1" } as const;
    expect(decodeSharedPending(encodeSharedPending(end))).toEqual(end);
  });

  it("refuses malformed messages with a GatewayError", () => {
    const good = JSON.parse(encodeSharedPending(sendOf(prompt(4, 0, 1), 1))) as Record<string, unknown>;
    for (const text of [
      "not json",
      "[1,2]",
      JSON.stringify({ ...good, k: "x" }),
      JSON.stringify({ ...good, i: -1 }),
      JSON.stringify({ ...good, b: 0 }),
      JSON.stringify({ ...good, a: null }), // offset 1 without its anchor
      JSON.stringify({ ...good, o: 0 }), // an anchor without an offset
      JSON.stringify({ ...good, h: ["1"] }),
    ])
      expect(() => decodeSharedPending(text), text).toThrow(GatewayError);
  });
});

describe("PendingBlocks with another replica's send", () => {
  it("shares its carried blocks only with prompts holding its anchor, and counts the work past its offset", () => {
    const pending = new PendingBlocks(1_000, 60_000);
    const sent = prompt(10, 6 * SIZE, 1);
    const id = pending.addShared({ ...sendOf(sent, 4), tailKeys: sendOf(sent, 4).tailKeys }, 0, FIRST_HEARD);
    expect(id).toBeDefined();
    expect(pending.sharedBlocks(sent.keys, 1)).toBe(10);
    expect(pending.sharedBlocks(prompt(12, 6 * SIZE, 2).keys, 1)).toBe(6); // the stem's 6 blocks
    expect(pending.sharedBlocks(prompt(12, 3 * SIZE, 2).keys, 1)).toBe(0); // differs before the anchor
    expect(pending.sharedBlocks(prompt(3, 6 * SIZE, 2).keys, 1)).toBe(0); // shorter than the offset
    expect(pending.remainingTokens(1)).toBe(sent.promptTokens - 4 * SIZE);
    // Its events report blocks 4-7: the work left shrinks; all of them: only its last token is left, and the
    // entry lasts until its end.
    const held = new Set(Array.from(sent.keys).slice(0, 8));
    pending.progressed((key) => held.has(key), 2);
    expect(pending.remainingTokens(2)).toBe(sent.promptTokens - 8 * SIZE);
    for (const key of sent.keys) held.add(key);
    pending.progressed((key) => held.has(key), 3);
    expect(pending.remainingTokens(3)).toBe(sent.promptTokens - 10 * SIZE);
    pending.release(id!);
    expect(pending.size).toBe(0);
  });

  it("keeps nothing for an empty tail or an offset without its anchor", () => {
    const pending = new PendingBlocks(1_000, 60_000);
    const sent = prompt(4, 0, 1);
    expect(pending.addShared({ ...sendOf(sent, 4) }, 0, FIRST_HEARD)).toBeUndefined();
    expect(pending.addShared({ ...sendOf(sent, 2), anchor: undefined }, 0, FIRST_HEARD)).toBeUndefined();
    expect(pending.size).toBe(0);
  });
});

describe("EngineIndex.touchChain", () => {
  it("makes a prompt known by its last held block the most recently used, as touch() does with its keys", () => {
    const walked = new EngineIndex(1_000);
    const touched = new EngineIndex(1_000);
    const a = Array.from({ length: 4 * SIZE }, (_, i) => 10 + i);
    const b = Array.from({ length: 4 * SIZE }, (_, i) => 9_000 + i);
    for (const index of [walked, touched]) {
      index.stored(storedEvent([1n, 2n, 3n, 4n], null, a, SIZE, null));
      index.stored(storedEvent([5n, 6n, 7n, 8n], null, b, SIZE, null));
    }
    const keysA = promptBlocksOf([...a, 1], SIZE, undefined).keys;
    walked.touchChain(keysA[3]!);
    touched.touch(keysA, 4);
    // Evicting 4 blocks now takes b's (a was used last), on both.
    for (const index of [walked, touched]) expect(index.forecastRun(keysA, 4, 4, () => false)).toBe(4);
    // Before any touch, a's blocks were the oldest.
    const fresh = new EngineIndex(1_000);
    fresh.stored(storedEvent([1n, 2n, 3n, 4n], null, a, SIZE, null));
    fresh.stored(storedEvent([5n, 6n, 7n, 8n], null, b, SIZE, null));
    expect(fresh.forecastRun(keysA, 4, 4, () => false)).toBe(0);
  });

  it("gives a held chain back from its last key (chainTo), and nothing when a block of it is gone", () => {
    const index = new EngineIndex(1_000);
    const a = Array.from({ length: 4 * SIZE }, (_, i) => 10 + i);
    index.stored(storedEvent([1n, 2n, 3n, 4n], null, a, SIZE, null));
    const keys = promptBlocksOf([...a, 1], SIZE, undefined).keys;
    expect(Array.from(index.chainTo(keys[2]!, 3)!)).toEqual(Array.from(keys.subarray(0, 3)));
    expect(index.chainTo(keys[2]!, 4)).toBeUndefined(); // longer than the chain
    index.removed({ type: "BlockRemoved", blockHashes: [2n], medium: "GPU", groupIdx: 0 });
    expect(index.chainTo(keys[3]!, 4)).toBeUndefined();
  });
});

describe("two replicas sharing their sends through Redis", () => {
  const redis = useRedisServer();
  const cleanups: (() => unknown)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** Two replicas' views of one engine (driven by hand through `pub`), sharing their sends through Redis. */
  async function twoReplicas() {
    const pub = new XPublisher({ linger: 0, verbosity: "allSubs" }); // both subscriptions reach it
    await pub.bind("tcp://127.0.0.1:0");
    cleanups.push(() => pub.close());
    const source = { endpoint: pub.lastEndpoint ?? "", topic: "kv" };
    const clock = new ManualClock(0);
    const manual = new ManualTimers(clock);
    // Timers on the clock that say when a send's head start is set, so the test waits on that, not on time.
    const headStartSet: (() => void)[] = [];
    const nextHeadStart = () => new Promise<void>((resolve) => headStartSet.push(resolve));
    const timers: Timers = {
      nowMs: () => manual.nowMs(),
      after: (delayMs, callback) => {
        const cancel = manual.after(delayMs, callback);
        if (delayMs <= SHARED_SEND_HEAD_START_MS) headStartSet.splice(0).forEach((resolve) => resolve());
        return cancel;
      },
    };
    const store = {
      kind: "redis" as const,
      url: redis.server.url,
      timeout_ms: 1_000,
      key_prefix: "shared-pending-test:",
    };
    const views = ["a", "b"].map((replicaId) => {
      const applied: (() => void)[] = [];
      const heard: (() => void)[] = [];
      const view = new KvCacheView({
        replayTimeoutMs: 5_000,
        clock,
        timers,
        replicaId,
        onApplied: () => applied.splice(0).forEach((resolve) => resolve()),
      });
      view.configure([{ id: "e1", source, maxBlocks: 1_000 }]);
      const share = shareKvPendingOverRedis(view, store, {
        logger: { warn: () => undefined, info: () => undefined },
        health: { up: () => undefined, error: () => undefined },
        onMessage: () => heard.splice(0).forEach((resolve) => resolve()),
      });
      cleanups.push(() => view.close());
      return {
        view,
        share,
        applied: () => new Promise<void>((resolve) => applied.push(resolve)),
        /** Resolves once the next message from the channel (its own included) was applied. */
        nextMessage: () => new Promise<void>((resolve) => heard.push(resolve)),
      };
    });
    const [a, b] = views as [(typeof views)[0], (typeof views)[0]];
    await Promise.all([a.share.whenLive(), b.share.whenLive()]);
    await pub.receive();
    await pub.receive(); // both subscribers reached the publisher
    return { pub, a, b, manual, nextHeadStart };
  }

  /** The engine has stored the shared stem's first 2 blocks, and both views know it. */
  async function storeStem(pub: XPublisher, views: { applied(): Promise<void> }[]): Promise<void> {
    const stem = Array.from({ length: 2 * SIZE }, (_, i) => 7 + i);
    const stored = Promise.all(views.map((view) => view.applied()));
    await pub.send([
      "kv",
      encodeSeq(0n),
      encodeKvEventBatch(
        { ts: 1, events: [storedEvent([1n, 2n], null, stem, SIZE, null)], dataParallelRank: 0 },
        "map",
      ),
    ]);
    await stored;
  }

  it.skipIf(redis.skip)(
    "counts the other replica's sent prompt as pending and its prefill as work ahead, until it ends",
    async () => {
      const { pub, a, b } = await twoReplicas();
      await storeStem(pub, [a, b]);

      const sent = prompt(10, 6 * SIZE, 1); // its first 2 blocks are the stem the engine holds
      expect(b.view.held("e1", sent, undefined)?.tokens).toBe(2 * SIZE);
      expect(b.view.activeTokens("e1")).toBe(0);
      expect(b.view.otherReplicasRequests("e1")).toBe(0);
      // Both replicas' messages come back to b; wait until a's send has been applied there.
      const told = b.nextMessage();
      const release = await announceAndSend(a.view, "e1", sent);
      await told;
      expect(b.view.held("e1", sent, undefined)?.tokens).toBe(10 * SIZE);
      expect(b.view.held("e1", prompt(12, 6 * SIZE, 2), undefined)?.tokens).toBe(6 * SIZE);
      expect(b.view.activeTokens("e1")).toBe(sent.promptTokens - 2 * SIZE);
      // The load bound counts a's request on e1 beside b's own (placement/filter-kv-bounded-load.ts).
      expect(b.view.otherReplicasRequests("e1")).toBe(1);
      const ended = b.nextMessage();
      release();
      await ended;
      expect(b.view.held("e1", sent, undefined)?.tokens).toBe(2 * SIZE);
      expect(b.view.activeTokens("e1")).toBe(0);
      expect(b.view.otherReplicasRequests("e1")).toBe(0);
      // b's own sends come back to it and are skipped: only what it tracks itself counts.
      const own = b.nextMessage();
      const releaseOwn = await announceAndSend(b.view, "e1", sent);
      await own;
      expect(b.view.activeTokens("e1")).toBe(sent.promptTokens - 2 * SIZE);
      expect(b.view.otherReplicasRequests("e1")).toBe(0);
      releaseOwn();
    },
    30_000,
  );

  it.skipIf(redis.skip)(
    "predicts a send with every send announced before its own, after the other's head start",
    async () => {
      const { pub, a, b, manual, nextHeadStart } = await twoReplicas();
      await storeStem(pub, [a, b]);
      // Two siblings sharing a 6-block opening, placed at once by two replicas.
      const first = a.view.place("e1", prompt(10, 6 * SIZE, 1))!;
      const second = b.view.place("e1", prompt(12, 6 * SIZE, 2))!;
      expect(second.expectedAtSend(0)).toBe(2 * SIZE); // a's is placed, not on its way: only the stem
      await first.announce(); // no other send to wait for
      // b's announcement is answered after a's (Redis orders them): by then a's send is applied at b, and b's
      // request, counting on a's blocks, gives a's request its head start to the engine.
      const headStartSet = nextHeadStart();
      const aHeard = a.nextMessage(); // b's send, which the channel orders after a's
      let left = false;
      const leaving = second.announce()!.then(() => void (left = true));
      await headStartSet;
      expect(manual.nextDueMs()).toBe(SHARED_SEND_HEAD_START_MS);
      manual.advance(SHARED_SEND_HEAD_START_MS - 1);
      await Promise.resolve();
      expect(left).toBe(false);
      manual.advance(1);
      await leaving;
      expect(second.expectedAtSend(0)).toBe(6 * SIZE);
      // a has heard b's send now, but the channel ordered it after a's own: a's request is ahead of it.
      await aHeard;
      expect(a.view.otherReplicasRequests("e1")).toBe(1);
      expect(first.expectedAtSend(0)).toBe(2 * SIZE);
      first.markSent(2 * SIZE);
      second.markSent(6 * SIZE);
      // A sibling announced once a's send is older than the head start leaves at once.
      const third = b.view.place("e1", prompt(11, 6 * SIZE, 4))!;
      await third.announce();
      expect(manual.size).toBe(0);
      // Announced, then dropped before it left (its client gone, its slot lost): the others forget it.
      const dropped = a.view.place("e1", prompt(9, 6 * SIZE, 3))!;
      const bHeard = b.nextMessage();
      await dropped.announce();
      await bHeard;
      expect(b.view.otherReplicasRequests("e1")).toBe(2);
      const ended = b.nextMessage();
      dropped.release();
      await ended;
      expect(b.view.otherReplicasRequests("e1")).toBe(1);
      first.release();
      second.release();
      third.release();
    },
    30_000,
  );
});
