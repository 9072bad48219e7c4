// The gateway's view of engines' caches over real ZMQ on loopback: a hand-driven publisher for the sequence rules
// (gaps replayed, restarts, both encodings, unknown keys), and a simulated engine for predictions that must equal
// what the engine then reports as cached.
import { afterEach, describe, expect, it } from "vitest";
import { Router, XPublisher } from "zeromq";
import { KvCacheView, type KvEventsBackend } from "../../src/kv-events/kv-cache-view.js";
import { promptBlocksOf, simulatedPromptTokens } from "../../src/kv-events/prompt-blocks.js";
import {
  encodeKvEventBatch,
  encodeSeq,
  type BlockStored,
  type KvEvent,
  type KvEventEncoding,
} from "../../src/kv-events/wire.js";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";
import { loopbackKvEvents } from "./loopback-kv-events.js";
import { Encoder } from "@msgpack/msgpack";
import { createBalancer } from "../../src/affinity/balancers.js";
import type { BindingStore } from "../../src/affinity/binding-store.js";
import { MemoryBindingStore } from "../../src/affinity/memory-bindings.js";
import { PlacementService } from "../../src/affinity/placement-service.js";
import { StickyTable } from "../../src/affinity/sticky-table.js";
import { ManualClock } from "../../src/core/clock.js";
import { SeededRandom } from "../../src/core/random.js";
import { candidate, CountingRecorder, SlowWriteStore, TEST_HASH_KEY } from "../affinity/helpers.js";
import { storedEvent } from "./stored-event.js";
import { sendNow } from "./send-now.js";

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A view whose every applied batch can be awaited. */
function makeView(clock?: ManualClock): {
  view: KvCacheView;
  applied: (predicate: () => boolean) => Promise<void>;
} {
  const waiters: { predicate: () => boolean; resolve: () => void }[] = [];
  const view = new KvCacheView({
    replayTimeoutMs: 5_000,
    ...(clock === undefined ? {} : { clock, pendingTtlMs: 10_000 }),
    onApplied: () => {
      for (const waiter of waiters.slice()) {
        if (waiter.predicate()) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      }
    },
  });
  cleanups.push(() => view.close());
  const applied = (predicate: () => boolean): Promise<void> =>
    predicate() ? Promise.resolve() : new Promise((resolve) => waiters.push({ predicate, resolve }));
  return { view, applied };
}

const TOKENS = Array.from({ length: 64 }, (_, i) => 1000 + i);

function stored(
  hashes: bigint[],
  parent: bigint | null,
  tokens: number[],
  sessionId: string | null = null,
): BlockStored {
  return storedEvent(hashes, parent, tokens, 16, sessionId);
}

/** A publisher driven by hand, with a replay socket serving what it kept. */
async function handPublisher(encoding: KvEventEncoding = "map") {
  const pub = new XPublisher({ linger: 0 });
  await pub.bind("tcp://127.0.0.1:0");
  const router = new Router({ linger: 0 });
  await router.bind("tcp://127.0.0.1:0");
  cleanups.push(() => {
    pub.close();
    router.close();
  });
  const kept: { seq: bigint; payload: Uint8Array }[] = [];
  void (async () => {
    try {
      for await (const [id, , start] of router) {
        const from = (start as Buffer).readBigUInt64BE(0);
        for (const batch of kept)
          if (batch.seq >= from) await router.send([id as Buffer, "", encodeSeq(batch.seq), batch.payload]);
        await router.send([id as Buffer, "", encodeSeq(-1n), ""]);
      }
    } catch {
      // closed
    }
  })();
  let subscribed: Promise<unknown> | undefined;
  let ts = 1_700_000_000;
  return {
    source: { endpoint: pub.lastEndpoint ?? "", replayEndpoint: router.lastEndpoint ?? "", topic: "kv" },
    /** Resolves once a subscriber's subscription reached the publisher (so nothing sent after it is dropped). */
    subscribed(): Promise<unknown> {
      return (subscribed ??= pub.receive());
    },
    kept,
    async publish(seq: bigint, events: KvEvent[], options: { live?: boolean; payload?: Uint8Array } = {}) {
      const payload =
        options.payload ?? encodeKvEventBatch({ ts: (ts += 1), events, dataParallelRank: 0 }, encoding);
      kept.push({ seq, payload });
      if (options.live ?? true) await pub.send(["kv", encodeSeq(seq), payload]);
    },
  };
}

function backend(id: string, source: KvEventsBackend["source"], maxBlocks = 1_000): KvEventsBackend {
  return { id, source, maxBlocks };
}

const BLOCKS = promptBlocksOf([...TOKENS, 1], 16, undefined); // 4 full reusable blocks of TOKENS

/** A view of engine e1 on a manual clock, once it has applied e1's store of TOKENS' first two blocks. */
async function viewHoldingTwoBlocks() {
  const publisher = await handPublisher();
  const clock = new ManualClock(1_000);
  const { view, applied } = makeView(clock);
  view.configure([backend("e1", publisher.source)]);
  await publisher.subscribed();
  await publisher.publish(0n, [stored([11n, 12n], null, TOKENS.slice(0, 32))]);
  await applied(() => view.stats()[0]?.subscriber.lastSeq === 0);
  return { publisher, clock, view, applied };
}

/** Places calls of BLOCKS' prompt on the view's one engine e1 through a PlacementService over `store`. */
function placeOn(view: KvCacheView, clock: ManualClock, store: BindingStore) {
  const placement = new PlacementService({
    store,
    clock,
    balancer: createBalancer("least_inflight", new SeededRandom(3)),
    recorder: new CountingRecorder(),
    stickyTtlMs: 60_000,
    loadFactor: 0,
    sessionless: "prefix",
    kvCache: view,
  });
  const hints = { prefixKey: undefined, kvPromptBlocks: () => BLOCKS };
  return (sessionId: string | undefined) =>
    placement.place(sessionId, "small", [candidate("e1")], new Set(), hints);
}

describe("KvCacheView with a hand-driven publisher", () => {
  for (const encoding of ["map", "array"] as const) {
    it(`indexes stored and removed blocks (${encoding} encoding)`, async () => {
      const publisher = await handPublisher(encoding);
      const { view, applied } = makeView();
      view.configure([backend("e1", publisher.source)]);
      await publisher.subscribed();
      await publisher.publish(0n, [stored([11n, 12n], null, TOKENS.slice(0, 32))]);
      await publisher.publish(1n, [stored([13n, 14n], 12n, TOKENS.slice(32, 64))]);
      await applied(() => view.stats()[0]?.subscriber.lastSeq === 1);
      expect(view.held("e1", BLOCKS, undefined)).toEqual({ tokens: 64, via: "tokens" });
      await publisher.publish(2n, [{ type: "BlockRemoved", blockHashes: [12n], medium: "GPU", groupIdx: 0 }]);
      await applied(() => view.stats()[0]?.subscriber.lastSeq === 2);
      expect(view.held("e1", BLOCKS, undefined)?.tokens).toBe(16);
      await publisher.publish(3n, [{ type: "AllBlocksCleared" }]);
      await applied(() => view.stats()[0]?.subscriber.lastSeq === 3);
      expect(view.held("e1", BLOCKS, undefined)?.tokens).toBe(0);
    });
  }

  it("counts copies: a hash stored twice survives one removal", async () => {
    const publisher = await handPublisher();
    const { view, applied } = makeView();
    view.configure([backend("e1", publisher.source)]);
    await publisher.subscribed();
    await publisher.publish(0n, [
      stored([11n], null, TOKENS.slice(0, 16)),
      stored([11n], null, TOKENS.slice(0, 16)),
    ]);
    await publisher.publish(1n, [{ type: "BlockRemoved", blockHashes: [11n], medium: "GPU", groupIdx: 0 }]);
    await applied(() => view.stats()[0]?.subscriber.lastSeq === 1);
    expect(view.held("e1", BLOCKS, undefined)?.tokens).toBe(16);
  });

  it("replays a gap from the replay socket, in order", async () => {
    const publisher = await handPublisher();
    const { view, applied } = makeView();
    view.configure([backend("e1", publisher.source)]);
    await publisher.subscribed();
    await publisher.publish(0n, [stored([11n, 12n], null, TOKENS.slice(0, 32))]);
    // Batch 1 never reaches the subscriber live (a dropped message); batch 2 reveals the gap.
    await publisher.publish(1n, [stored([13n], 12n, TOKENS.slice(32, 48))], { live: false });
    await publisher.publish(2n, [stored([14n], 13n, TOKENS.slice(48, 64))]);
    await applied(() => view.stats()[0]?.subscriber.lastSeq === 2);
    const stats = view.stats()[0]?.subscriber;
    // Filled by the replay socket, either when the gap showed or by the replay every subscriber starts with.
    expect(stats?.replayedBatches).toBeGreaterThanOrEqual(1);
    expect(stats?.lostGaps).toBe(0);
    expect(view.held("e1", BLOCKS, undefined)?.tokens).toBe(64);
  });

  it("clears the index when the engine restarts (its sequence starts over)", async () => {
    const publisher = await handPublisher();
    const { view, applied } = makeView();
    view.configure([backend("e1", publisher.source)]);
    await publisher.subscribed();
    await publisher.publish(0n, [stored([11n, 12n], null, TOKENS.slice(0, 32))]);
    await publisher.publish(1n, [stored([13n, 14n], 12n, TOKENS.slice(32, 64))]);
    await applied(() => view.stats()[0]?.subscriber.lastSeq === 1);
    publisher.kept.length = 0;
    await publisher.publish(0n, [stored([21n], null, TOKENS.slice(0, 16))]);
    await applied(() => view.stats()[0]?.subscriber.restarts === 1);
    expect(view.held("e1", BLOCKS, undefined)?.tokens).toBe(16);
  });

  it("ignores unknown keys and unknown event types, and survives a payload that is not a batch", async () => {
    const publisher = await handPublisher();
    const { view, applied } = makeView();
    view.configure([backend("e1", publisher.source)]);
    await publisher.subscribed();
    const encoder = new Encoder({ useBigInt64: true });
    const payload = encoder.encode([
      2.5,
      [
        {
          type: "BlockStored",
          block_hashes: [11n, 12n],
          parent_block_hash: null,
          token_ids: TOKENS.slice(0, 32),
          block_size: 16,
          lora_id: null,
          medium: "GPU",
          lora_name: null,
          brand_new_field: { nested: [1, 2] },
          session_id: "s1",
        },
        { type: "BlockInactive", block_hashes: [11n] },
      ],
      0,
    ]);
    await publisher.publish(0n, [], { payload: new Uint8Array([0xc1]) });
    await publisher.publish(1n, [], { payload });
    await applied(() => view.stats()[0]?.subscriber.lastSeq === 1);
    expect(view.stats()[0]?.subscriber).toMatchObject({ decodeErrors: 1, unknownEvents: 1 });
    expect(view.held("e1", BLOCKS, undefined)?.tokens).toBe(32);
    // Without the prompt's tokens, the session's chain says what the engine holds of it.
    expect(view.held("e1", undefined, "s1")).toEqual({ tokens: 32, via: "session" });
  });

  it("counts a sent prompt's blocks as held until its events come, it is released, or its TTL passes", async () => {
    const { publisher, clock, view, applied } = await viewHoldingTwoBlocks();
    expect(view.held("e1", BLOCKS, undefined)?.tokens).toBe(32);
    expect(view.activeTokens("e1")).toBe(0);
    // Room before it must evict: max_blocks (1,000; it has never evicted) less the 2 blocks held.
    expect(view.roomTokens("e1")).toBe((1_000 - 2) * 16);

    // Sent: the two blocks it will compute count as held, and its prefill is work ahead on the engine.
    const release = sendNow(view, "e1", BLOCKS);
    expect(release).toBeDefined();
    expect(view.held("e1", BLOCKS, undefined)?.tokens).toBe(64);
    expect(view.activeTokens("e1")).toBe(BLOCKS.promptTokens - 32);
    expect(view.roomTokens("e1")).toBe((1_000 - 2) * 16 - (BLOCKS.promptTokens - 32)); // its prefill fills some
    // Its events come: the index holds the blocks, and only its last token is left (the entry lasts until the
    // request ends: the engine may evict what it holds until it schedules it).
    await publisher.publish(1n, [stored([13n, 14n], 12n, TOKENS.slice(32, 64))]);
    await applied(() => view.stats()[0]?.subscriber.lastSeq === 1);
    expect(view.activeTokens("e1")).toBe(BLOCKS.promptTokens - 64);
    release!(); // the request's end
    expect(view.activeTokens("e1")).toBe(0);
    expect(view.held("e1", BLOCKS, undefined)?.tokens).toBe(64);

    // A prompt whose blocks never come: held while pending, not after its release, nor after the TTL.
    const other = promptBlocksOf([...TOKENS.slice(0, 32), ...TOKENS.slice(0, 32), 5], 16, undefined);
    const releaseOther = sendNow(view, "e1", other);
    expect(view.held("e1", other, undefined)?.tokens).toBe(64);
    releaseOther!();
    expect(view.held("e1", other, undefined)?.tokens).toBe(32);
    sendNow(view, "e1", other);
    clock.advance(9_999);
    expect(view.held("e1", other, undefined)?.tokens).toBe(64);
    clock.advance(1);
    expect(view.held("e1", other, undefined)?.tokens).toBe(32);
    expect(sendNow(view, "nope", other)).toBeUndefined();
  });

  it("forecasts the blocks an engine that has filled up will evict before it schedules the request", async () => {
    const publisher = await handPublisher();
    const { view, applied } = makeView(new ManualClock(1_000));
    view.configure([backend("e1", publisher.source)]);
    await publisher.subscribed();
    const other = Array.from({ length: 64 }, (_, i) => 5000 + i);
    const otherBlocks = promptBlocksOf([...other, 1], 16, undefined);
    // BLOCKS' chain stored first, then another prompt's: BLOCKS is the least recently used.
    await publisher.publish(0n, [stored([11n, 12n, 13n, 14n], null, TOKENS)]);
    await publisher.publish(1n, [stored([21n, 22n, 23n, 24n], null, other)]);
    await applied(() => view.stats()[0]?.subscriber.lastSeq === 1);
    // An engine that never evicted has room up to its max_blocks (1,000, 8 held): 10k tokens of work ahead evict
    // nothing, 16k (1,000 blocks) evict 8, BLOCKS' first among them.
    expect(view.forecastHeld("e1", BLOCKS, 64, 10_000)).toBe(64);
    expect(view.forecastHeld("e1", BLOCKS, 64, 16_000)).toBe(0);

    // It evicted one block: its capacity is the 8 it held, one is spare. 2 blocks of work ahead evict one more,
    // the oldest: BLOCKS' first.
    await publisher.publish(2n, [{ type: "BlockRemoved", blockHashes: [24n], medium: "GPU", groupIdx: 0 }]);
    await applied(() => view.stats()[0]?.subscriber.lastSeq === 2);
    expect(view.forecastHeld("e1", BLOCKS, 64, 32)).toBe(0);
    expect(view.forecastHeld("e1", BLOCKS, 64, 16)).toBe(64);

    // A request reusing BLOCKS ended: its blocks are the most recent, the other prompt's go first.
    sendNow(view, "e1", BLOCKS)!();
    expect(view.forecastHeld("e1", BLOCKS, 64, 32)).toBe(64);
    expect(view.forecastHeld("e1", BLOCKS, 64, 4 * 16 + 16)).toBe(48); // tail first, as vLLM frees

    // While a request holding the other prompt runs there, its blocks cannot be evicted: BLOCKS' tail goes.
    const release = sendNow(view, "e1", otherBlocks);
    expect(view.forecastHeld("e1", BLOCKS, 64, 32)).toBe(48);
    // Its end makes the other prompt the most recent: BLOCKS is the oldest again, its tail first.
    release!();
    expect(view.forecastHeld("e1", BLOCKS, 64, 32)).toBe(48);
    expect(view.forecastHeld("e1", BLOCKS, 64, 5 * 16)).toBe(0);
  });

  it("predicts from the prompts already sent: one placed and not yet sent reaches the engine after", async () => {
    const { view } = await viewHoldingTwoBlocks();
    // A new session's first call is placed; its binding is being written, so it is not yet sent.
    const waiting = view.place("e1", BLOCKS)!;
    // Placement counts its blocks (a burst's next request should find them there)...
    expect(view.held("e1", BLOCKS, undefined)?.tokens).toBe(64);
    // ...but a sessionless call with the same prompt, sent at once, reaches the engine first: it finds the 32
    // tokens the engine holds, not the 64 the waiting one will compute.
    const first = view.place("e1", BLOCKS)!;
    expect(first.expectedAtSend(0)).toBe(32);
    first.markSent(32);
    // The waiting one is sent after it: the first one computes the rest ahead of it.
    expect(waiting.expectedAtSend(0)).toBe(64);
    waiting.markSent(64);
    // Both sent, work ahead is the first one's prefill past 32 and the waiting one's last token.
    expect(view.activeTokens("e1")).toBe(BLOCKS.promptTokens - 32 + (BLOCKS.promptTokens - 64));
    first.release();
    waiting.release();
    expect(view.activeTokens("e1")).toBe(0);
  });

  it("gives a placement awaiting its binding write the prediction of its send, with what was sent meanwhile", async () => {
    const { clock, view } = await viewHoldingTwoBlocks();
    const store = new SlowWriteStore(new StickyTable(1_000, TEST_HASH_KEY));
    const place = placeOn(view, clock, store);
    // A new session's first call: placed, then its binding is written (a Redis round trip).
    const newSession = place("s-new");
    expect(store.writes).toHaveLength(1);
    // Meanwhile a call without a session, same prompt, is placed and sent at once: it reaches the engine first
    // and finds the 32 tokens the engine holds, not the new session's 64.
    const sessionless = await place(undefined);
    expect(sessionless?.send?.()).toBe(32);
    // The binding written, the new session's call is sent after it: the engine will have computed the rest.
    store.writes[0]!();
    const placed = await newSession;
    expect(placed?.send?.()).toBe(64);
    sessionless?.releaseKvPending?.();
    placed?.releaseKvPending?.();
    expect(view.activeTokens("e1")).toBe(0);
  });

  it("counts a placed prompt for others' predictions from its send, not its placement (a wait for a slot)", async () => {
    const { clock, view } = await viewHoldingTwoBlocks();
    const place = placeOn(view, clock, new MemoryBindingStore(new StickyTable(1_000, TEST_HASH_KEY)));
    // Two calls of one prompt placed on e1; the first waits for a slot while the second is sent.
    const waiting = await place(undefined);
    const sentFirst = await place(undefined);
    expect(sentFirst?.send?.()).toBe(32);
    // The first, sent after it, finds the whole prompt the second had the engine compute.
    expect(waiting?.send?.()).toBe(64);
    waiting?.releaseKvPending?.();
    sentFirst?.releaseKvPending?.();
    expect(view.activeTokens("e1")).toBe(0);
  });

  it("counts as work ahead what the forecast or the engine evicts of a sent prompt before scheduling it", async () => {
    const publisher = await handPublisher();
    const { view, applied } = makeView(new ManualClock(1_000));
    view.configure([backend("e1", publisher.source)]);
    await publisher.subscribed();
    await publisher.publish(0n, [stored([11n, 12n, 13n, 14n], null, TOKENS)]);
    await applied(() => view.stats()[0]?.subscriber.lastSeq === 0);
    // Held whole, but the forecast says the engine keeps 32 tokens of it: it computes the rest again.
    const forecast = sendNow(view, "e1", BLOCKS, 32);
    expect(view.activeTokens("e1")).toBe(BLOCKS.promptTokens - 32);
    forecast!();
    // Held whole and forecast kept: its last token only.
    const release = sendNow(view, "e1", BLOCKS, 64);
    expect(view.activeTokens("e1")).toBe(BLOCKS.promptTokens - 64);
    // The engine evicts its last two blocks before scheduling it: it will compute them again.
    await publisher.publish(1n, [
      { type: "BlockRemoved", blockHashes: [14n, 13n], medium: "GPU", groupIdx: 0 },
    ]);
    await applied(() => view.stats()[0]?.subscriber.lastSeq === 1);
    expect(view.activeTokens("e1")).toBe(BLOCKS.promptTokens - 32);
    expect(view.held("e1", BLOCKS, undefined)?.tokens).toBe(64); // still coming: its request computes them
    // It does: their events come.
    await publisher.publish(2n, [stored([13n, 14n], 12n, TOKENS.slice(32, 64))]);
    await applied(() => view.stats()[0]?.subscriber.lastSeq === 2);
    expect(view.activeTokens("e1")).toBe(BLOCKS.promptTokens - 64);
    release!();
    expect(view.activeTokens("e1")).toBe(0);
  });

  it("marks another replica's prefix in use once its index holds the chain its message named", async () => {
    const publisher = await handPublisher();
    const { view, applied } = makeView(new ManualClock(1_000));
    view.configure([backend("e1", publisher.source)]);
    await publisher.subscribed();
    // Replica a sent BLOCKS, finding its first 2 blocks held (its index ran ahead of this one's): only the
    // blocks past them travel, after the key of block 1.
    view.applyShared({
      kind: "sent",
      replica: "a",
      id: 1,
      engine: "e1",
      offset: 2,
      anchor: BLOCKS.keys[1],
      tailKeys: Array.from(BLOCKS.keys.subarray(2)),
      promptTokens: BLOCKS.promptTokens,
      blockSizeTokens: 16,
    });
    // Then this replica's index learns them, and another prompt after them; the engine evicts one block.
    const other = Array.from({ length: 64 }, (_, i) => 5000 + i);
    const otherBlocks = promptBlocksOf([...other, 1], 16, undefined);
    await publisher.publish(0n, [stored([11n, 12n], null, TOKENS.slice(0, 32))]);
    await publisher.publish(1n, [stored([21n, 22n, 23n, 24n], null, other)]);
    await publisher.publish(2n, [{ type: "BlockRemoved", blockHashes: [24n], medium: "GPU", groupIdx: 0 }]);
    await applied(() => view.stats()[0]?.subscriber.lastSeq === 2);
    // Two evictions (3 blocks of work, 1 spare): BLOCKS' first two are in use by a's request, so the other
    // prompt's go.
    expect(view.forecastHeld("e1", otherBlocks, 48, 48)).toBe(0);
    // Once a's send is forgotten, BLOCKS' blocks are the oldest and free: they go first.
    view.forgetShared();
    expect(view.forecastHeld("e1", otherBlocks, 48, 48)).toBe(48);
  });

  it("says nothing of engines without events", () => {
    const { view } = makeView();
    expect(view.held("nope", BLOCKS, "s1")).toBeUndefined();
    expect(view.roomTokens("nope")).toBeUndefined();
  });
});

describe("KvCacheView with a simulated engine", () => {
  async function simEngine(): Promise<SimEngineHandle> {
    const config = loopbackKvEvents();
    const engine = await startSimEngine({ profile: "instant", kvCapacityBlocks: 4096, kvEvents: { config } });
    cleanups.push(() => engine.close());
    return engine;
  }

  async function chat(engine: SimEngineHandle, body: Record<string, unknown>): Promise<number> {
    const response = await fetch(`${engine.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: engine.model, max_tokens: 4, ...body }),
    });
    const json = (await response.json()) as { usage: { prompt_tokens_details: { cached_tokens: number } } };
    return json.usage.prompt_tokens_details.cached_tokens;
  }

  it("predicts exactly the tokens the engine then reports cached, learning the past by replay", async () => {
    const engine = await simEngine();
    const system = { role: "system", content: "You are a careful coding agent. ".repeat(40) };
    const first = { messages: [system, { role: "user", content: "Read src/index.ts" }] };
    await chat(engine, first);
    // Subscribed only now: what the engine stored so far comes from its replay socket.
    const { view, applied } = makeView();
    const info = engine.kvEvents;
    if (info === undefined) throw new Error("no events");
    view.configure([{ id: "sim", source: { ...info, topic: info.topic }, maxBlocks: 4096 }]);
    const firstBlocks = (() => {
      const prompt = simulatedPromptTokens("chat", first);
      if (prompt === undefined) throw new Error("not tokenized");
      return promptBlocksOf(prompt.tokens, 16, prompt.cacheSalt);
    })();
    // Until a live batch arrives the subscriber has nothing to replay against: new turns make batches.
    for (let turn = 0; (view.held("sim", firstBlocks, undefined)?.tokens ?? 0) === 0 && turn < 100; turn++) {
      await chat(engine, { messages: [{ role: "user", content: `unrelated ${turn} `.repeat(30) }] });
      await new Promise((resolve) => setImmediate(resolve));
    }
    await applied(() => (view.held("sim", firstBlocks, undefined)?.tokens ?? 0) > 0);
    expect(view.stats()[0]?.subscriber.replayedBatches).toBeGreaterThan(0);

    const second = {
      messages: [system, { role: "user", content: "Read src/index.ts and then src/main.ts as well, please" }],
    };
    const prompt = simulatedPromptTokens("chat", second);
    if (prompt === undefined) throw new Error("not tokenized");
    const predicted = view.held("sim", promptBlocksOf(prompt.tokens, 16, undefined), undefined)?.tokens;
    const cached = await chat(engine, second);
    expect(predicted).toBeGreaterThan(0);
    expect(predicted).toBe(cached);
  });
});
