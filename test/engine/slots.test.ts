// Slot choice: continuation first, then the longest shared prefix, least recently used on ties; FIFO waiting.
import { describe, expect, it } from "vitest";
import { commonPrefixLength, SlotPool } from "../../src/engine/slots.js";

class FakeSlot {
  constructor(
    readonly name: string,
    public contextTokens: number[] = [],
  ) {}
}

function pool(...states: number[][]): { pool: SlotPool<FakeSlot>; slots: FakeSlot[] } {
  const slots = states.map((tokens, i) => new FakeSlot(`s${i}`, tokens));
  return { pool: new SlotPool(slots), slots };
}

const SYSTEM = [1, 2, 3, 4, 5, 6];

describe("SlotPool", () => {
  it("measures common prefixes", () => {
    expect(commonPrefixLength([1, 2, 3], [1, 2, 4])).toBe(2);
    expect(commonPrefixLength([], [1])).toBe(0);
    expect(commonPrefixLength([1, 2], [1, 2, 3])).toBe(2);
  });

  it("gives a conversation's next turn the slot holding its history", async () => {
    const { pool: p } = pool([...SYSTEM, 10, 11], [...SYSTEM, 20, 21], []);
    const claim = await p.acquire([...SYSTEM, 20, 21, 22, 23]);
    expect(claim).toMatchObject({ slot: { name: "s1" }, commonPrefix: 8 });
  });

  it("sends a new conversation to a free slot rather than over another's history", async () => {
    const { pool: p } = pool([...SYSTEM, 10, 11], []);
    expect(await p.acquire([...SYSTEM, 30])).toMatchObject({ slot: { name: "s1" }, commonPrefix: 0 });
  });

  it("otherwise overwrites the slot sharing the longest prefix, the least recently used on ties", async () => {
    const { pool: p, slots } = pool([...SYSTEM, 10], [...SYSTEM, 20], [1, 2, 9]);
    const first = await p.acquire([...SYSTEM, 30]);
    expect(first).toMatchObject({ slot: { name: "s0" }, commonPrefix: 6 });
    p.release(first.slot);
    slots[0]!.contextTokens = [...SYSTEM, 30, 31];
    // s0 and s1 share 6 tokens with this prompt; s1 was used less recently.
    expect(await p.acquire([...SYSTEM, 40])).toMatchObject({ slot: { name: "s1" }, commonPrefix: 6 });
  });

  it("queues requests when every slot is busy, in arrival order, and lets a waiting one withdraw", async () => {
    const { pool: p } = pool([]);
    const held = await p.acquire([1]);
    expect(p.busy).toBe(1);
    const order: string[] = [];
    const controller = new AbortController();
    const withdrawn = p.acquire([2], controller.signal);
    const second = p.acquire([3]).then((claim) => (order.push("second"), claim));
    const third = p.acquire([4]).then((claim) => (order.push("third"), claim));
    expect(p.waiting).toBe(3);
    controller.abort();
    await expect(withdrawn).rejects.toThrow("aborted");
    expect(p.waiting).toBe(2);
    p.release(held.slot);
    p.release((await second).slot);
    p.release((await third).slot);
    expect(order).toEqual(["second", "third"]);
    expect(p.busy).toBe(0);
  });

  it("fails the waiting requests when the engine closes", async () => {
    const { pool: p } = pool([]);
    await p.acquire([1]);
    const waiting = p.acquire([2]);
    p.rejectWaiting(new Error("engine closing"));
    await expect(waiting).rejects.toThrow("engine closing");
  });
});
