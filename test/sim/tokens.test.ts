// Tokenizer approximation, chat rendering and reply text: determinism and the prefix properties caching needs.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { SeededRandom } from "../../src/core/random.js";
import { renderChat, type ChatMessage } from "../../src/sim/chat-template.js";
import { createEngineRequest } from "../../src/sim/request-factory.js";
import { REPLY_PIECES, ReplyGenerator, sampleStopLength } from "../../src/sim/text-generator.js";
import { countTokens, encode, pieceId, SPECIAL_TOKENS } from "../../src/sim/tokenizer.js";

const message = fc.record({
  role: fc.constantFrom<ChatMessage["role"]>("user", "assistant", "tool"),
  content: fc.string({ maxLength: 80 }),
});

describe("tokenizer", () => {
  it("gives one token per 4 characters, the same ids every time", () => {
    const text = "The quick brown fox jumps over the lazy dog.";
    expect(encode(text)).toHaveLength(Math.ceil(text.length / 4));
    expect(countTokens(text)).toBe(11);
    expect(encode(text)).toEqual(encode(text));
    expect(encode("abcd")).not.toEqual(encode("abce"));
  });

  it("encodes every 4-character piece as pieceId does, the last one shorter", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 64, unit: "binary" }), (text) => {
        const pieces: number[] = [];
        for (let at = 0; at < text.length; at += 4)
          pieces.push(pieceId(text, at, Math.min(at + 4, text.length)));
        expect(encode(text)).toEqual(pieces);
      }),
    );
  });

  it("renders each conversation as an extension of its earlier turns", () => {
    fc.assert(
      fc.property(fc.array(message, { minLength: 1, maxLength: 6 }), fc.nat(), (messages, cut) => {
        const k = cut % messages.length;
        const shorter = renderChat(messages.slice(0, k), { addGenerationPrompt: false });
        const longer = renderChat(messages, { addGenerationPrompt: false });
        expect(longer.slice(0, shorter.length)).toEqual(shorter);
      }),
    );
  });

  it("re-tokenizes a generated reply to the ids the engine generated", () => {
    const request = createEngineRequest({
      id: "r",
      promptTokenIds: [1, 2, 3],
      maxTokens: undefined,
      maxModelLen: 10_000,
      stop: { medianTokens: 50, sigma: 0.3 },
      seed: 9,
      choiceIndex: 0,
    });
    while (!request.appendNextToken());
    const ids = request.tokens.slice(3);
    expect(ids.at(-1)).toBe(SPECIAL_TOKENS.imEnd);
    expect(encode(request.outputTexts.join(""))).toEqual(ids.slice(0, -1));
  });

  it("renders tools and tool-call history into the prompt", () => {
    const withTools = renderChat([{ role: "user", content: "hi" }], {
      tools: [{ type: "function", function: { name: "read_file", parameters: {} } }],
    });
    const plain = renderChat([{ role: "user", content: "hi" }]);
    expect(withTools.length).toBeGreaterThan(plain.length + 30);
    const history = renderChat([
      { role: "user", content: "read it" },
      {
        role: "assistant",
        content: "",
        toolCalls: [{ function: { name: "read_file", arguments: '{"path":"a"}' } }],
      },
      { role: "tool", content: "file contents" },
    ]);
    expect(history.length).toBeGreaterThan(plain.length);
  });
});

describe("reply text", () => {
  it("is made of 4-character pieces and depends only on the seed", () => {
    expect(REPLY_PIECES.every((piece) => piece.length === 4)).toBe(true);
    const draw = (seed: number): string => {
      const generator = new ReplyGenerator(new SeededRandom(seed), 20, false);
      return Array.from({ length: 20 }, (_, i) => generator.token(i).text).join("");
    };
    expect(draw(1)).toEqual(draw(1));
    expect(draw(1)).not.toEqual(draw(2));
  });

  it("draws reply lengths around the profile's median", () => {
    const random = new SeededRandom(42);
    const lengths = Array.from({ length: 4000 }, () =>
      sampleStopLength(random, { medianTokens: 200, sigma: 0.7 }),
    );
    lengths.sort((a, b) => a - b);
    const median = lengths[lengths.length / 2]!;
    expect(median).toBeGreaterThan(180);
    expect(median).toBeLessThan(220);
    expect(Math.min(...lengths)).toBeGreaterThanOrEqual(1);
  });

  it("has a natural length from the seed that max_tokens caps and ignore_eos replaces", () => {
    const reply = (
      seed: number,
      maxTokens: number | undefined,
      extra: { ignoreEos?: boolean; scriptedText?: string } = {},
    ): { length: number; finish: string; text: string } => {
      const request = createEngineRequest({
        id: "r",
        promptTokenIds: [1, 2, 3],
        maxTokens,
        maxModelLen: 10_000,
        stop: { medianTokens: 200, sigma: 0.7 },
        seed,
        choiceIndex: 0,
        ...extra,
      });
      while (!request.appendNextToken());
      return {
        length: request.numOutputTokens,
        finish: request.plannedFinishReason,
        text: request.outputTexts.join(""),
      };
    };
    const natural = reply(5, 100_000);
    // The same seed, the same length and words; other seeds, other lengths.
    expect(reply(5, 100_000)).toEqual(natural);
    expect(natural.finish).toBe("stop");
    expect(new Set([1, 2, 3, 4, 6, 7, 8].map((seed) => reply(seed, 100_000).length)).size).toBeGreaterThan(4);
    expect(reply(5, undefined)).toEqual(natural);
    // A cap below it cuts the same words short.
    const capped = reply(5, natural.length - 1);
    expect(capped).toMatchObject({ length: natural.length - 1, finish: "length" });
    expect(natural.text.startsWith(capped.text)).toBe(true);
    // ignore_eos: exactly max_tokens, past the natural end too.
    expect(reply(5, natural.length + 50, { ignoreEos: true })).toMatchObject({
      length: natural.length + 50,
      finish: "length",
    });
    // A scripted reply is its text and end-of-turn, whatever ignore_eos says.
    expect(reply(5, 1000, { ignoreEos: true, scriptedText: "abcdefgh" })).toMatchObject({
      length: 3,
      finish: "stop",
      text: "abcdefgh",
    });
  });
});
