// Pending blocks (src/kv-events/pending-blocks.ts): prompts sent to an engine count as held there until the
// request ends, the TTL passes or the bound drops them; pure, on an injected time.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { PendingBlocks, prefillWorkTokens, sharedRun } from "../../src/kv-events/pending-blocks.js";
import { promptBlocksOf, type PromptBlocks } from "../../src/kv-events/prompt-blocks.js";

const SIZE = 16;

/** A prompt of `blocks` full reusable blocks: `shared` tokens from the common stem, the rest its own. */
function prompt(blocks: number, stem: number, own: number): PromptBlocks {
  const tokens = Array.from({ length: blocks * SIZE + 1 }, (_, i) => (i < stem ? 7 + i : 100_000 * own + i));
  return promptBlocksOf(tokens, SIZE, undefined);
}

/** A prompt's blocks as another replica's send carries them from offset 0. */
function tail(blocks: PromptBlocks) {
  return { tailKeys: blocks.keys, promptTokens: blocks.promptTokens, blockSizeTokens: SIZE };
}

function linearShared(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let n = 0;
  while (n < a.length && n < b.length && a[n] === b[n]) n++;
  return n;
}

describe("sharedRun", () => {
  it("finds the shared leading run of two content-key chains, as a linear walk does", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 700 }),
        (blocksA, blocksB, stem) => {
          const a = prompt(blocksA, stem, 1).keys;
          const b = prompt(blocksB, stem, 2).keys;
          const shared = sharedRun(a, b);
          expect(shared).toBe(linearShared(a, b));
          expect(shared).toBe(Math.min(blocksA, blocksB, Math.floor(stem / SIZE)));
        },
      ),
    );
  });
});

describe("PendingBlocks", () => {
  it("counts a sent prompt's blocks as held for a prompt sharing its prefix, until released", () => {
    const pending = new PendingBlocks(1_000, 60_000);
    const first = prompt(10, 6 * SIZE, 1);
    const id = pending.add(first, 0, 0);
    expect(id).toBeDefined();
    expect(pending.sharedBlocks(prompt(12, 6 * SIZE, 2).keys, 1)).toBe(6);
    expect(pending.sharedBlocks(first.keys, 1)).toBe(10);
    expect(pending.remainingTokens(1)).toBe(first.promptTokens);
    pending.release(id!);
    pending.release(id!); // twice is harmless
    expect(pending.sharedBlocks(first.keys, 2)).toBe(0);
    expect(pending.remainingTokens(2)).toBe(0);
    expect(pending.size).toBe(0);
  });

  it("tracks a prompt held whole (the engine may still evict it before scheduling it), not one past the bound", () => {
    const pending = new PendingBlocks(8, 60_000);
    const whole = prompt(5, 0, 1);
    expect(pending.add(whole, 5, 0)).toBeDefined();
    expect(pending.remainingTokens(0)).toBe(1); // its last token, which an engine always computes
    expect(pending.add(prompt(9, 0, 1), 0, 0)).toBeUndefined();
    expect(pending.size).toBe(1);
  });

  it("cuts a prompt's computed run back to a block the engine evicted before scheduling it", () => {
    const pending = new PendingBlocks(1_000, 60_000);
    const sent = prompt(10, 0, 1); // 161 tokens
    pending.add(sent, 8, 0);
    const held = new Set<number>(Array.from(sent.keys).slice(0, 8));
    // Another prompt's block evicted, or a copy of this one's while the engine still holds the content: no cut.
    pending.progressed((key) => held.has(key), 1, new Set([prompt(3, 0, 2).keys[1]!]));
    pending.progressed((key) => held.has(key), 1, new Set([sent.keys[5]!]));
    expect(pending.remainingTokens(1)).toBe(161 - 8 * SIZE);
    // Blocks 5 and 6 evicted: the engine computes them again, and everything after them.
    held.delete(sent.keys[5]!);
    held.delete(sent.keys[6]!);
    pending.progressed((key) => held.has(key), 2, new Set([sent.keys[6]!, sent.keys[5]!]));
    expect(pending.remainingTokens(2)).toBe(161 - 5 * SIZE);
    // With a context weight, the same work counts its attention: each token after the 80 computed ones.
    expect(pending.remainingTokens(2, 0.01)).toBeCloseTo(
      prefillWorkTokens(161 - 5 * SIZE, 5 * SIZE, 0.01),
      9,
    );
    expect(pending.remainingTokens(2, 0.01)).toBeGreaterThan(161 - 5 * SIZE);
    expect(pending.sharedBlocks(sent.keys, 2)).toBe(10); // still coming: its request computes them
    // Its request computes them again: the run grows as its events come.
    for (const key of Array.from(sent.keys).slice(0, 9)) held.add(key);
    pending.progressed((key) => held.has(key), 3);
    expect(pending.remainingTokens(3)).toBe(161 - 9 * SIZE);
  });

  it("finds the keys before a block of a pending prompt from that block's key", () => {
    const pending = new PendingBlocks(1_000, 60_000);
    const sent = prompt(10, 0, 1);
    pending.add(sent, 0, 0);
    expect(Array.from(pending.prefixTo(sent.keys[3]!, 4, 1)!).slice(0, 4)).toEqual(
      Array.from(sent.keys).slice(0, 4),
    );
    expect(pending.prefixTo(sent.keys[3]!, 5, 1)).toBeUndefined(); // not its block 4
    expect(pending.prefixTo(sent.keys[3]!, 0, 1)).toBeUndefined();
    expect(pending.prefixTo(sent.keys[9]!, 10, 60_000)).toBeUndefined(); // expired
  });

  it("counts only the tokens left to compute: those past what was held when sent, then past its events", () => {
    const pending = new PendingBlocks(1_000, 60_000);
    const sent = prompt(10, 0, 1); // 161 tokens
    pending.add(sent, 4, 0);
    expect(pending.remainingTokens(0)).toBe(161 - 4 * SIZE);
    const stored = new Set<number>(Array.from(sent.keys).slice(0, 7));
    pending.progressed((key) => stored.has(key), 1);
    expect(pending.remainingTokens(1)).toBe(161 - 7 * SIZE);
    expect(pending.size).toBe(1);
    // Every block reported: only the last token is left; the entry lasts until its request ends.
    for (const key of sent.keys) stored.add(key);
    pending.progressed((key) => stored.has(key), 2);
    expect(pending.remainingTokens(2)).toBe(1);
    expect(pending.size).toBe(1);
    expect(pending.sharedBlocks(sent.keys, 2)).toBe(10);
  });

  it("tells when a prompt shares more with another replica's fresh send than with any older send", () => {
    const pending = new PendingBlocks(1_000, 60_000);
    const asked = prompt(10, 8 * SIZE, 9); // shares 8 blocks with each prompt below
    pending.add(prompt(10, 3 * SIZE, 1), 0, 0); // this gateway's own: 3 blocks, sent at 0
    expect(pending.freshOthers(asked.keys, 100, 90)).toBeUndefined(); // no other replica's send
    pending.add(prompt(10, 8 * SIZE, 2), 0, 95, true, { order: 1, atMs: 95 });
    pending.addShared({ offset: 0, anchor: undefined, ...tail(prompt(10, 5 * SIZE, 3)) }, 97, {
      order: 2,
      atMs: 97,
    });
    pending.add(prompt(10, 8 * SIZE, 4), 0, 98, false, { order: 3, atMs: 98 }); // placed, not sent: never counts
    expect(pending.freshOthers(asked.keys, 100, 90)).toEqual({ olderRun: 3, freshRun: 8, latestAtMs: 97 });
    // Past the window the other's 8-block send is an older one, which gives the most.
    expect(pending.freshOthers(asked.keys, 100, 96)).toBeUndefined();
    // Sends after this prompt's own in the fleet's order count for neither question.
    expect(pending.freshOthers(asked.keys, 100, 90, 0)).toBeUndefined();
    expect(pending.sharedBlocks(asked.keys, 100, true, 0)).toBe(3);
    expect(pending.sharedBlocks(asked.keys, 100, true, 1)).toBe(8);
  });

  it("lets an entry go after its TTL on the injected time", () => {
    const pending = new PendingBlocks(1_000, 5_000);
    const sent = prompt(3, 0, 1);
    pending.add(sent, 0, 1_000);
    expect(pending.sharedBlocks(sent.keys, 5_999)).toBe(3);
    expect(pending.sharedBlocks(sent.keys, 6_000)).toBe(0);
    expect(pending.remainingTokens(6_000)).toBe(0);
    pending.add(prompt(2, 0, 2), 0, 6_000); // purges the expired one
    expect(pending.size).toBe(1);
  });

  it("drops the oldest entries past its bound of blocks", () => {
    const pending = new PendingBlocks(20, 60_000);
    const a = prompt(8, 0, 1);
    const b = prompt(8, 0, 2);
    const c = prompt(8, 0, 3);
    pending.add(a, 0, 0);
    pending.add(b, 0, 1);
    pending.add(c, 0, 2);
    expect(pending.size).toBe(2);
    expect(pending.sharedBlocks(a.keys, 3)).toBe(0);
    expect(pending.sharedBlocks(c.keys, 3)).toBe(8);
  });

  it("keeps its bound and empties when every entry is released, whatever the order of operations", () => {
    const op = fc.oneof(
      fc.record({
        kind: fc.constant("add" as const),
        blocks: fc.integer({ min: 1, max: 12 }),
        stem: fc.integer({ min: 0, max: 200 }),
        held: fc.integer({ min: 0, max: 12 }),
      }),
      fc.record({ kind: fc.constant("release" as const), pick: fc.nat() }),
      fc.record({ kind: fc.constant("progress" as const), upTo: fc.integer({ min: 0, max: 12 }) }),
      fc.record({ kind: fc.constant("time" as const), ms: fc.integer({ min: 0, max: 3_000 }) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 60 }), (ops) => {
        const pending = new PendingBlocks(30, 10_000);
        const ids: number[] = [];
        const sentKeys: Float64Array[] = [];
        let nowMs = 0;
        let own = 0;
        for (const o of ops) {
          if (o.kind === "add") {
            const blocks = prompt(o.blocks, o.stem, ++own);
            const id = pending.add(blocks, o.held, nowMs);
            if (id !== undefined) ids.push(id);
            sentKeys.push(blocks.keys);
          } else if (o.kind === "release" && ids.length > 0) {
            pending.release(ids.splice(o.pick % ids.length, 1)[0]!);
          } else if (o.kind === "progress") {
            // The index holds the first `upTo` blocks of every prompt sent so far.
            const held = new Set(sentKeys.flatMap((keys) => Array.from(keys).slice(0, o.upTo)));
            pending.progressed((key) => held.has(key), nowMs);
          } else if (o.kind === "time") {
            nowMs += o.ms;
          }
          // Never more entries than blocks fit the bound, never negative work, shared runs within the prompt.
          expect(pending.size).toBeLessThanOrEqual(30);
          expect(pending.remainingTokens(nowMs)).toBeGreaterThanOrEqual(0);
          const last = sentKeys[sentKeys.length - 1];
          if (last !== undefined) expect(pending.sharedBlocks(last, nowMs)).toBeLessThanOrEqual(last.length);
        }
        for (const id of ids) pending.release(id);
        expect(pending.size).toBe(0);
        expect(pending.remainingTokens(nowMs)).toBe(0);
      }),
    );
  });
});
