// Prefix caching as vLLM does it: shared full blocks, pinned while running, LRU eviction only under pressure.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BlockPool } from "../../src/sim/block-pool.js";
import { renderChat } from "../../src/sim/chat-template.js";
import { runStep, runUntilIdle } from "../../src/sim/simulate.js";
import { makeRequest, makeScheduler, tokenRange } from "./helpers.js";

const BLOCK = 16;

function serve(prompt: number[], id: string, setup = makeScheduler()) {
  const request = makeRequest(id, prompt, 4);
  setup.scheduler.add(request);
  runUntilIdle(setup.scheduler, setup.clock);
  return request;
}

describe("prefix cache", () => {
  it("serves the full blocks of a repeated prompt from the cache", () => {
    const setup = makeScheduler();
    const prompt = tokenRange(100);
    expect(serve(prompt, "first", setup).numCachedTokens).toBe(0);
    // 100 tokens = 6 full blocks + 4 tokens: the 6 full blocks come back.
    expect(serve(prompt, "second", setup).numCachedTokens).toBe(6 * BLOCK);
  });

  it("recomputes the last block of a block-aligned prompt, as vLLM must to get logits", () => {
    const setup = makeScheduler();
    const prompt = tokenRange(96);
    serve(prompt, "first", setup);
    expect(serve(prompt, "second", setup).numCachedTokens).toBe(5 * BLOCK);
  });

  it("lets two sessions with one system prompt share exactly the blocks that prompt fills", () => {
    const setup = makeScheduler();
    const system = { role: "system" as const, content: "You are a careful coding agent. ".repeat(40) };
    const a = renderChat([system, { role: "user", content: "Session A asks about the build." }]);
    const b = renderChat([system, { role: "user", content: "Session B wants the tests fixed." }]);
    let common = 0;
    while (a[common] === b[common]) common += 1;
    const shared = Math.floor(common / BLOCK);
    const first = makeRequest("a", a, 4);
    setup.scheduler.add(first);
    runStep(setup.scheduler, setup.clock);
    const firstBlocks = [...first.blockIds];
    runUntilIdle(setup.scheduler, setup.clock);

    const second = makeRequest("b", b, 4);
    setup.scheduler.add(second);
    runStep(setup.scheduler, setup.clock);
    expect(second.numCachedTokens).toBe(shared * BLOCK);
    expect(shared).toBeGreaterThan(10);
    // The very same physical blocks, and nothing past the shared prefix.
    expect(second.blockIds.slice(0, shared)).toEqual(firstBlocks.slice(0, shared));
    expect(second.blockIds.slice(shared).some((id) => firstBlocks.includes(id))).toBe(false);
  });

  it("caches generated tokens too, so the next turn of a conversation hits its predecessor's reply", () => {
    const setup = makeScheduler();
    const first = makeRequest("turn1", tokenRange(40), 30);
    setup.scheduler.add(first);
    runUntilIdle(setup.scheduler, setup.clock);
    // The next prompt is the whole first sequence plus a new user message.
    const next = makeRequest("turn2", [...first.tokens, ...tokenRange(20, 5000)], 4);
    setup.scheduler.add(next);
    runUntilIdle(setup.scheduler, setup.clock);
    // 40 + 30 tokens, the last of which was sampled but never computed: 69 computed -> 4 full blocks.
    expect(next.numCachedTokens).toBe(4 * BLOCK);
  });

  it("keeps finished requests' blocks cached until space is needed, then evicts least recently used first", () => {
    // 3 blocks per request (40 tokens + 4 generated), room for 6 blocks: two finished requests fit, a third evicts.
    const setup = makeScheduler({ kvCapacityBlocks: 6 });
    const promptA = tokenRange(40, 1);
    const promptB = tokenRange(40, 1000);
    const promptC = tokenRange(40, 2000);
    serve(promptA, "a", setup);
    serve(promptB, "b", setup);
    expect(setup.scheduler.kv.pool.numCachedBlocks).toBe(4);
    serve(promptC, "c", setup);
    // C took the 3 blocks at the head of the free queue: all of A's (least recently used), tail block first.
    expect(serve(promptB, "b-again", setup).numCachedTokens).toBe(2 * BLOCK);
    expect(serve(promptA, "a-again", setup).numCachedTokens).toBe(0);
  });

  it("never evicts the blocks of a running request", () => {
    const { scheduler, clock } = makeScheduler({ kvCapacityBlocks: 4 });
    const long = makeRequest("long", tokenRange(40), 20);
    scheduler.add(long);
    const first = scheduler.schedule();
    expect(first).toBeDefined();
    clock.advance(first!.durationMs);
    scheduler.commit(first!);
    const pinned = [...long.blockIds];
    // Another request cannot take those blocks; with one block free it waits instead.
    const other = makeRequest("other", tokenRange(40, 900), 2);
    scheduler.add(other);
    const step = scheduler.schedule();
    expect(step?.sequences.map((s) => s.request.id)).toEqual(["long"]);
    expect(long.blockIds.slice(0, pinned.length)).toEqual(pinned);
    expect(scheduler.numWaiting).toBe(1);
  });

  it("reports usage as the fraction of blocks pinned by running requests", () => {
    const { scheduler, clock } = makeScheduler({ kvCapacityBlocks: 10 });
    scheduler.add(makeRequest("r", tokenRange(50), 2));
    const step = scheduler.schedule()!;
    expect(scheduler.kvCacheUsage).toBeCloseTo(4 / 10);
    clock.advance(step.durationMs);
    scheduler.commit(step);
    runUntilIdle(scheduler, clock);
    expect(scheduler.kvCacheUsage).toBe(0);
    expect(scheduler.kv.pool.numCachedBlocks).toBe(3);
  });
});

describe("block pool", () => {
  it("keeps free + referenced blocks equal to capacity under any sequence of operations", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.constantFrom("alloc", "release", "touch", "register"), fc.nat(1000)), {
          maxLength: 200,
        }),
        (ops) => {
          const pool = new BlockPool(8);
          const held: number[] = [];
          for (const [op, n] of ops) {
            if (op === "alloc" && pool.numFreeBlocks > 0) held.push(pool.allocate());
            else if (op === "release" && held.length > 0) pool.release(held.splice(n % held.length, 1)[0]!);
            else if (op === "touch") {
              const cached = pool.lookup(n % 5);
              if (cached !== undefined) {
                pool.touch(cached);
                held.push(cached);
              }
            } else if (op === "register" && held.length > 0) pool.register(held[n % held.length]!, n % 5);
          }
          const referenced = new Set(held).size;
          expect(pool.numFreeBlocks + referenced).toBe(8);
        },
      ),
    );
  });
});
