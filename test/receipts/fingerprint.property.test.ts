// The conversation fingerprint: stable under what does not change the prompt, different when history is rewritten.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fingerprintOf, type ConversationFingerprint } from "../../src/receipts/fingerprint.js";
import type { Endpoint } from "../../src/gateway/completion-request.js";

type Message = Record<string, unknown>;

const textArb = fc.string({ maxLength: 40 });
const roleArb = fc.constantFrom("user", "assistant", "tool", "system");
const messageArb: fc.Arbitrary<Message> = fc.oneof(
  fc.record({ role: roleArb, content: textArb }),
  fc.record({
    role: roleArb,
    content: fc.array(fc.record({ type: fc.constant("text"), text: textArb }), { maxLength: 3 }),
  }),
  fc.record({
    role: fc.constant("assistant"),
    content: fc.constant(null),
    tool_calls: fc.array(
      fc.record({
        id: textArb,
        type: fc.constant("function"),
        function: fc.record({ name: textArb, arguments: textArb }),
      }),
      { minLength: 1, maxLength: 2 },
    ),
  }),
);
const conversationArb = fc.array(messageArb, { minLength: 1, maxLength: 8 });
/** Fields that do not reach the prompt. */
const extrasArb = fc.record(
  {
    stream: fc.boolean(),
    temperature: fc.double({ min: 0, max: 2, noNaN: true }),
    max_tokens: fc.integer({ min: 1, max: 4096 }),
    metadata: fc.dictionary(fc.string({ maxLength: 5 }), fc.string({ maxLength: 5 })),
    top_p: fc.double({ min: 0, max: 1, noNaN: true }),
    user: fc.string({ maxLength: 10 }),
  },
  { requiredKeys: [] },
);

function fp(endpoint: Endpoint, body: Record<string, unknown>): ConversationFingerprint {
  const result = fingerprintOf(endpoint, body);
  if (result === undefined) throw new Error("no fingerprint");
  return result;
}

/** The same object with its keys in reverse order (and its messages' keys too). */
function reordered(messages: Message[]): Message[] {
  return messages.map((m) => Object.fromEntries(Object.entries(m).reverse()));
}

describe("fingerprintOf", () => {
  it("is stable under stream, sampling settings, metadata, max_tokens and key order", () => {
    fc.assert(
      fc.property(conversationArb, extrasArb, extrasArb, (messages, a, b) => {
        const one = fp("chat", { model: "m", messages, ...a });
        const two = fp("chat", { ...b, messages: reordered(messages), model: "other" });
        expect(two.chainAt(two.items)).toBe(one.chainAt(one.items));
      }),
    );
  });

  it("keeps every prefix's hash when the conversation grows, so a later turn extends an earlier one", () => {
    fc.assert(
      fc.property(conversationArb, conversationArb, (earlier, added) => {
        const before = fp("chat", { messages: earlier });
        const after = fp("chat", { messages: [...earlier, ...added] });
        for (let n = 0; n <= earlier.length; n++) expect(after.chainAt(n)).toBe(before.chainAt(n));
      }),
    );
  });

  it("changes when any earlier message is rewritten (compaction, truncation, an edit)", () => {
    fc.assert(
      fc.property(conversationArb, fc.nat(), textArb, (messages, pick, text) => {
        const index = pick % messages.length;
        const original = messages[index]!;
        const rewritten = { ...original, content: `${JSON.stringify(original["content"])}|${text}` };
        const edited = messages.map((m, i) => (i === index ? rewritten : m));
        const a = fp("chat", { messages });
        const b = fp("chat", { messages: edited });
        // Every prefix that holds the rewritten message differs; the ones before it do not.
        for (let n = 0; n <= messages.length; n++) {
          if (n <= index) expect(b.chainAt(n)).toBe(a.chainAt(n));
          else expect(b.chainAt(n)).not.toBe(a.chainAt(n));
        }
      }),
    );
  });

  it("changes when messages are dropped from the middle or the system prompt changes", () => {
    fc.assert(
      fc.property(conversationArb, fc.nat(), (messages, pick) => {
        fc.pre(messages.length >= 2);
        const index = pick % messages.length;
        const dropped = messages.filter((_, i) => i !== index);
        const a = fp("chat", { messages });
        const b = fp("chat", { messages: dropped });
        // The shorter conversation is not the longer one's prefix unless the dropped message was the last.
        if (index < messages.length - 1) expect(b.chainAt(b.items)).not.toBe(a.chainAt(b.items));
      }),
    );
    fc.assert(
      fc.property(textArb, textArb, conversationArb, (s1, s2, messages) => {
        fc.pre(s1 !== s2);
        const a = fp("messages", { system: s1, messages });
        const b = fp("messages", { system: s2, messages });
        expect(a.chainAt(0)).not.toBe(b.chainAt(0));
      }),
    );
  });

  it("ignores Anthropic's cache_control marks, which clients move from turn to turn", () => {
    fc.assert(
      fc.property(fc.array(textArb, { minLength: 1, maxLength: 5 }), fc.nat(), (texts, mark) => {
        const blocks = (marked: number) =>
          texts.map((text, i) => ({
            role: i % 2 === 0 ? "user" : "assistant",
            content: [
              { type: "text", text, ...(i === marked ? { cache_control: { type: "ephemeral" } } : {}) },
            ],
          }));
        const a = fp("messages", {
          system: "s",
          messages: blocks(mark % texts.length),
          metadata: { user_id: "u" },
        });
        const b = fp("messages", { system: "s", messages: blocks(-1) });
        expect(a.chainAt(a.items)).toBe(b.chainAt(b.items));
      }),
    );
  });

  it("hashes a string content like the same text as one text part", () => {
    fc.assert(
      fc.property(textArb, (text) => {
        const a = fp("messages", { messages: [{ role: "user", content: text }] });
        const b = fp("messages", { messages: [{ role: "user", content: [{ type: "text", text }] }] });
        expect(a.chainAt(1)).toBe(b.chainAt(1));
      }),
    );
  });

  it("tells a string input from the same text as a Responses message, and marks replies", () => {
    const a = fp("responses", { input: "hello", instructions: "be brief" });
    const b = fp("responses", { input: [{ role: "user", content: "hello" }], instructions: "be brief" });
    expect(a.chainAt(1)).toBe(b.chainAt(1));
    const c = fp("responses", {
      input: [
        { role: "user", content: "hello" },
        { type: "function_call", call_id: "c1", name: "f", arguments: "{}" },
        { type: "function_call_output", call_id: "c1", output: "42" },
      ],
      previous_response_id: "resp_1",
    });
    expect([c.isReply(0), c.isReply(1), c.isReply(2)]).toEqual([false, true, false]);
    expect(c.previousResponseId).toBe("resp_1");
  });

  it("has no fingerprint for a bare text completion", () => {
    expect(fingerprintOf("completions", { prompt: "abc" })).toBeUndefined();
  });

  it("keeps text boundaries: moving characters between two messages changes the hash", () => {
    const a = fp("chat", {
      messages: [
        { role: "user", content: "ab" },
        { role: "user", content: "c" },
      ],
    });
    const b = fp("chat", {
      messages: [
        { role: "user", content: "a" },
        { role: "user", content: "bc" },
      ],
    });
    expect(a.chainAt(2)).not.toBe(b.chainAt(2));
  });
});

describe("fingerprintOf on long texts (sampled)", () => {
  it("sees a long message's head, tail, length and sampled middle change", () => {
    const long = "x".repeat(50_000);
    const base = fp("chat", { messages: [{ role: "tool", content: long }] }).chainAt(1);
    const variants = [
      `y${long.slice(1)}`, // head
      `${long.slice(1)}y`, // tail
      `${long}x`, // length
      `${long.slice(0, 25_000)}y${long.slice(25_001)}`, // a sampled unit of the middle: 16 + 8 x 3123
    ];
    for (const text of variants)
      expect(fp("chat", { messages: [{ role: "tool", content: text }] }).chainAt(1)).not.toBe(base);
  });
});
