// jsonNesting (completion-request.ts) skips strings by searching for their closing quote: it must give what a
// byte-by-byte scan gives, on any JSON and on malformed bytes alike.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { jsonNesting } from "../../src/gateway/completion-request.js";

/** The byte-by-byte scan (the gateway's before the ninth round of bench/README.md's overhead work). */
function nestingByteByByte(raw: Buffer, limit: number): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < raw.length; i++) {
    const byte = raw[i]!;
    if (inString) {
      if (byte === 0x5c) i++;
      else if (byte === 0x22) inString = false;
    } else if (byte === 0x22) inString = true;
    else if (byte === 0x7b || byte === 0x5b) {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > limit) return deepest;
      }
    } else if (byte === 0x7d || byte === 0x5d) depth--;
  }
  return deepest;
}

describe("jsonNesting", () => {
  it("counts nesting outside strings, escaped quotes and backslashes included", () => {
    expect(jsonNesting(Buffer.from('{"a":[{"b":"[[[\\"{{"}]}'), 128)).toBe(3);
    expect(jsonNesting(Buffer.from('{"a":"\\\\","b":[[1]]}'), 128)).toBe(3);
    expect(jsonNesting(Buffer.from("[".repeat(200)), 128)).toBe(129);
    expect(jsonNesting(Buffer.from('{"open'), 128)).toBe(1);
  });

  it("agrees with a byte-by-byte scan on any JSON and on any bytes", () => {
    const texts = fc.oneof(
      fc.json({ maxDepth: 6 }),
      fc.string({ unit: fc.constantFrom("{", "}", "[", "]", '"', "\\", "a", ":", ",") }),
    );
    fc.assert(
      fc.property(texts, fc.integer({ min: 1, max: 8 }), (text, limit) => {
        const raw = Buffer.from(text);
        expect(jsonNesting(raw, limit)).toBe(nestingByteByByte(raw, limit));
      }),
      { numRuns: 2000 },
    );
  });
});
