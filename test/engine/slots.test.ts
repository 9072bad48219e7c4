// Slot choice: the slot holding the conversation first (its generated tail may differ), then the longest shared
// prefix, least recently used on ties; FIFO waiting.
import { describe, expect, it } from "vitest";
import { commonPrefixLength, SlotPool, SlotWaitError } from "../../src/engine/slots.js";

class FakeSlot {
  constructor(
    readonly name: string,
    public contextTokens: number[] = [],
    /** Leading tokens the slot was sent; the rest it generated. All of them unless told. */
    public sentTokenCount: number = contextTokens.length,
  ) {}
}

function pool(...states: (number[] | FakeSlot)[]): { pool: SlotPool<FakeSlot>; slots: FakeSlot[] } {
  const slots = states.map((state, i) => (state instanceof FakeSlot ? state : new FakeSlot(`s${i}`, state)));
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

  it("keeps a conversation on its slot when the reply came back tokenized otherwise, a free slot or not", async () => {
    // s0 was sent SYSTEM + [10, 11] and generated [50, 51, 52]; the client's next turn spells that reply [50, 59]
    // (one token where two were generated), so the prompt leaves s0's state inside the generated tail.
    const history = new FakeSlot("s0", [...SYSTEM, 10, 11, 50, 51, 52], 8);
    const { pool: p } = pool(history, []);
    expect(await p.acquire([...SYSTEM, 10, 11, 50, 59, 12])).toMatchObject({
      slot: { name: "s0" },
      commonPrefix: 9,
    });
    // A reply re-tokenized from its very first token still keeps the whole prompt the slot was sent.
    const { pool: q } = pool(new FakeSlot("s0", [...SYSTEM, 10, 11, 50, 51], 8), []);
    expect(await q.acquire([...SYSTEM, 10, 11, 58, 12])).toMatchObject({
      slot: { name: "s0" },
      commonPrefix: 8,
    });
  });

  it("prefers, among slots holding the conversation, the one sharing the most with the prompt", async () => {
    const older = new FakeSlot("s0", [...SYSTEM, 10, 50, 51], 7); // turn 1 of the conversation, and its reply
    const newer = new FakeSlot("s1", [...SYSTEM, 10, 50, 12, 60, 61], 9); // turn 2 of it
    const { pool: p } = pool(older, newer, []);
    expect(await p.acquire([...SYSTEM, 10, 50, 12, 60, 13])).toMatchObject({
      slot: { name: "s1" },
      commonPrefix: 10,
    });
  });

  it("still protects a history that the prompt leaves inside what that slot was sent", async () => {
    // The prompt shares SYSTEM + [10] with s0, whose sent prompt went on to [11, 12, 13]: another conversation.
    const { pool: p } = pool(new FakeSlot("s0", [...SYSTEM, 10, 11, 12, 13, 50], 10), []);
    expect(await p.acquire([...SYSTEM, 10, 20])).toMatchObject({ slot: { name: "s1" }, commonPrefix: 0 });
  });

  it("lets a text prompt's last sent token merge with the text appended to it", async () => {
    // "Answer: " ends in " " (token 9); "Answer: Paris ..." spells " Paris" (token 70) there instead.
    const { pool: p } = pool(new FakeSlot("s0", [...SYSTEM, 9, 40, 41], 7), []);
    expect(await p.acquire([...SYSTEM, 70, 41, 42])).toMatchObject({ slot: { name: "s0" }, commonPrefix: 6 });
  });

  it("counts only the state a slot holds when its prompt was cut short (an aborted prefill)", async () => {
    const { pool: p } = pool(new FakeSlot("s0", [...SYSTEM, 10], 20), []);
    expect(await p.acquire([...SYSTEM, 10, 11])).toMatchObject({ slot: { name: "s0" }, commonPrefix: 7 });
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
    await expect(withdrawn).rejects.toMatchObject({ name: "SlotWaitError", code: "aborted" });
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
    p.rejectWaiting(new SlotWaitError("engine_closing", "engine closing"));
    await expect(waiting).rejects.toMatchObject({ code: "engine_closing" });
  });
});
