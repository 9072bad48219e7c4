// PendingReceipt's two ways of reading the previous turn: at once (the in-process memory) and through a promise
// (a shared store), including one that fails.
import { describe, expect, it } from "vitest";
import {
  InMemoryReceipts,
  type ReceiptMemory,
  type SessionReceipts,
} from "../../src/receipts/receipt-memory.js";
import { TurnReceipts, type ReceiptRequest } from "../../src/receipts/turn-receipts.js";

const placement = { backendId: "a", tier: "small", reason: "affinity_hit" };

function turn(messages: { role: string; content: string }[]): ReceiptRequest {
  return { endpoint: "chat", body: { model: "m", messages }, prefixKey: undefined };
}
const first = turn([{ role: "user", content: "hello" }]);
const second = turn([
  { role: "user", content: "hello" },
  { role: "assistant", content: "hi" },
  { role: "user", content: "more" },
]);

/** A store whose reads answer when the test says so (or fail), writing into an in-process memory. */
class DeferredMemory implements ReceiptMemory {
  readonly inner = new InMemoryReceipts(100, 60_000, () => 0);
  private release: (() => void)[] = [];
  constructor(private readonly fails = false) {}
  read(key: string): Promise<SessionReceipts | undefined> {
    return new Promise((resolve, reject) =>
      this.release.push(() => (this.fails ? reject(new Error("store down")) : resolve(this.inner.read(key)))),
    );
  }
  write(key: string, entry: SessionReceipts): void {
    this.inner.write(key, entry);
  }
  answer(): void {
    for (const release of this.release.splice(0)) release();
  }
  flush(): Promise<void> {
    return Promise.resolve();
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

describe("PendingReceipt", () => {
  it("with the in-process memory, has the previous turn at once and settles without waiting", () => {
    const receipts = new TurnReceipts(
      new InMemoryReceipts(100, 60_000, () => 0),
      { blockTokens: 16 },
      () => 0,
    );
    const one = receipts.begin("s", first)!;
    expect(one.loaded).toBe(true);
    const firstReceipt = one.settle(
      { promptTokens: 40, completionTokens: 10, cachedTokens: 0 },
      placement,
      undefined,
    );
    expect(firstReceipt).not.toBeInstanceOf(Promise);
    expect(firstReceipt).toMatchObject({ lostCause: "new_session", reusableTokens: 0 });
    const two = receipts.begin("s", second)!;
    expect(two.loaded).toBe(true);
    // The previous conversation was 50 tokens: 48 of them (3 blocks of 16, never the last token) reusable.
    expect(two.now({ promptTokens: 60, completionTokens: 5, cachedTokens: 48 }, placement)).toMatchObject({
      reusableTokens: 48,
      cachedTokens: 48,
      lostTokens: 0,
      lostCause: "none",
    });
  });

  it("with a store that answers later, has no receipt until the read is in, then settles with it", async () => {
    const memory = new DeferredMemory();
    const receipts = new TurnReceipts(memory, { blockTokens: 16 }, () => 0);
    memory.inner.write("s", {
      last: { items: 1, chain: "", promptTokens: 40, tokens: 50, backendId: "b", tier: "small", atMs: 0 },
      receipts: [],
    });
    // The stored chain is not this conversation's: the receipt must come from the stored entry, not a default.
    const pending = receipts.begin("s", second)!;
    const usage = { promptTokens: 60, completionTokens: 5, cachedTokens: 0 };
    expect(pending.loaded).toBe(false);
    expect(pending.now(usage, placement)).toBeUndefined();
    const settled = pending.settle(usage, placement, undefined);
    expect(settled).toBeInstanceOf(Promise);
    memory.answer();
    expect(await settled).toMatchObject({ lostCause: "conversation_changed" });
    expect(pending.loaded).toBe(true);
  });

  it("with a store that fails, receipts the turn as a new session", async () => {
    const memory = new DeferredMemory(true);
    const receipts = new TurnReceipts(memory, { blockTokens: 16 }, () => 0);
    const pending = receipts.begin("s", second)!;
    const settled = pending.settle(
      { promptTokens: 60, completionTokens: 5, cachedTokens: 32 },
      placement,
      undefined,
    );
    memory.answer();
    expect(await settled).toMatchObject({ lostCause: "new_session", reusableTokens: 0, lostTokens: 0 });
  });
});
