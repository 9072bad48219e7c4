// The receipt rules: reusable tokens from the previous turn, cached from the engine, and one cause for the rest.
import { describe, expect, it } from "vitest";
import { fingerprintOf, type ConversationFingerprint } from "../../src/receipts/fingerprint.js";
import {
  continuedTokens,
  receiptOf,
  reusableOf,
  turnRecordOf,
  type TurnPlacement,
  type TurnRecord,
} from "../../src/receipts/receipt-rules.js";

const BLOCK = 16;
const system = { role: "system", content: "You are an agent." };
const user1 = { role: "user", content: "List the files." };
const reply1 = { role: "assistant", content: "a.txt b.txt" };
const user2 = { role: "user", content: "Open a.txt." };

function fp(messages: object[]): ConversationFingerprint {
  return fingerprintOf("chat", { messages })!;
}

const onA: TurnPlacement = { backendId: "a", tier: "small", reason: "affinity_hit" };
/** Turn 1 ran on engine a: 100 prompt tokens, 21 completion tokens. */
const turn1: TurnRecord = turnRecordOf(
  fp([system, user1]),
  { promptTokens: 100, completionTokens: 21 },
  onA,
  undefined,
  0,
);
const turn2 = fp([system, user1, reply1, user2]);
// 121 tokens, the last never computed: 7 whole blocks of 16.
const REUSABLE = 112;

describe("reusableOf", () => {
  it("counts whole blocks of the sequence less its last token", () => {
    expect(reusableOf(121, 16)).toBe(112);
    expect(reusableOf(113, 16)).toBe(112);
    expect(reusableOf(112, 16)).toBe(96);
    expect(reusableOf(1, 16)).toBe(0);
    expect(reusableOf(0, 16)).toBe(0);
    expect(reusableOf(10, 1)).toBe(9);
  });
});

describe("continuedTokens", () => {
  it("is the whole previous conversation when the request appends the reply and a new turn", () => {
    expect(continuedTokens(turn1, turn2)).toBe(121);
  });
  it("is the previous prompt when the request repeats it (a retry)", () => {
    expect(continuedTokens(turn1, fp([system, user1]))).toBe(100);
  });
  it("is undefined when history was rewritten, or the next item is not the assistant's", () => {
    expect(
      continuedTokens(turn1, fp([system, { role: "user", content: "Summary: files." }, user2])),
    ).toBeUndefined();
    expect(continuedTokens(turn1, fp([system, user1, user2]))).toBeUndefined();
    expect(continuedTokens(turn1, fp([system]))).toBeUndefined();
  });
  it("follows a Responses chain by its response id", () => {
    const first = fingerprintOf("responses", { input: "hi" })!;
    const record = turnRecordOf(first, { promptTokens: 30, completionTokens: 10 }, onA, "resp_1", 0);
    expect(
      continuedTokens(record, fingerprintOf("responses", { input: "more", previous_response_id: "resp_1" })!),
    ).toBe(40);
    expect(
      continuedTokens(record, fingerprintOf("responses", { input: "more", previous_response_id: "resp_0" })!),
    ).toBeUndefined();
  });
});

describe("receiptOf", () => {
  const receipt = (previous: TurnRecord | undefined, placement: TurnPlacement, cached: number, f = turn2) =>
    receiptOf(previous, f, placement, cached, BLOCK, 5);

  it("new_session: nothing known, nothing reusable, whatever the engine cached", () => {
    expect(receipt(undefined, onA, 32)).toMatchObject({
      reusableTokens: 0,
      cachedTokens: 32,
      lostTokens: 0,
      lostCause: "new_session",
      backendId: "a",
      atMs: 5,
    });
  });

  it("conversation_changed: a compacted history has nothing reusable", () => {
    const compacted = fp([system, { role: "user", content: "Summary so far." }, user2]);
    expect(receipt(turn1, onA, 16, compacted)).toMatchObject({
      reusableTokens: 0,
      cachedTokens: 16,
      lostTokens: 0,
      lostCause: "conversation_changed",
    });
  });

  it("none: the same engine served every reusable block", () => {
    expect(receipt(turn1, onA, REUSABLE)).toMatchObject({
      reusableTokens: REUSABLE,
      lostTokens: 0,
      lostCause: "none",
    });
    // An engine may serve more than the session left (a prefix shared with other sessions): nothing lost.
    expect(receipt(turn1, onA, REUSABLE + 16)).toMatchObject({ lostTokens: 0, lostCause: "none" });
  });

  it("evicted: the same engine, fewer cached", () => {
    expect(receipt(turn1, onA, 48)).toMatchObject({
      reusableTokens: REUSABLE,
      cachedTokens: 48,
      lostTokens: 64,
      lostCause: "evicted",
    });
  });

  it.each([
    ["spill", "spill"],
    ["failover", "failover"],
    ["rebind_backend_down", "failover"],
    ["rebind_expired", "binding_expired"],
    ["rebind_tier_changed", "tier_changed"],
    ["new_session", "rerouted"],
    ["affinity_disabled", "rerouted"],
    ["no_session", "rerouted"],
    ["prefix", "rerouted"],
  ])("another engine for reason %s: %s", (reason, cause) => {
    expect(receipt(turn1, { backendId: "b", tier: "small", reason }, 0)).toMatchObject({
      reusableTokens: REUSABLE,
      cachedTokens: 0,
      lostTokens: REUSABLE,
      lostCause: cause,
    });
  });

  it("tier_changed: another tier's engine, whatever the scheduler's reason", () => {
    expect(receipt(turn1, { backendId: "big-0", tier: "big", reason: "new_session" }, 0)).toMatchObject({
      lostCause: "tier_changed",
      lostTokens: REUSABLE,
    });
  });

  it("never reports a negative loss, and lost + cached covers the reusable part", () => {
    for (let cached = 0; cached <= 200; cached += 8) {
      const r = receipt(turn1, { backendId: "b", tier: "small", reason: "spill" }, cached);
      expect(r.lostTokens).toBe(Math.max(0, r.reusableTokens - cached));
      expect(r.lostCause === "none").toBe(r.lostTokens === 0);
    }
  });
});
