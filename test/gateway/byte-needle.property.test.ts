// ByteNeedle finds what Buffer#indexOf finds, bounded by where an occurrence may start.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ByteNeedle } from "../../src/gateway/byte-needle.js";

/** The model: Buffer#indexOf, and -1 when the occurrence starts at or past `before`. */
function modelIn(chunk: Buffer, needle: Buffer, from: number, before: number): number {
  const at = chunk.indexOf(needle, from);
  return at < before ? at : -1;
}

// Few letters, so that needles occur, nearly occur and overlap.
const text = fc.string({ unit: fc.constantFrom("a", "b", "{", "\n", '"'), maxLength: 60 });

describe("ByteNeedle", () => {
  it("finds the first occurrence starting in [from, before), by any of its bytes", () => {
    fc.assert(
      fc.property(
        text,
        text.filter((n) => n.length > 0),
        fc.nat(),
        fc.nat(),
        fc.nat(),
        (haystack, needleText, rareAt, fromSeed, beforeSeed) => {
          const chunk = Buffer.from(haystack, "latin1");
          const needle = new ByteNeedle(needleText, needleText[rareAt % needleText.length]!);
          const from = fromSeed % (chunk.length + 1);
          const before = beforeSeed % (chunk.length + 2);
          expect(needle.in(chunk, from, before)).toBe(modelIn(chunk, needle.bytes, from, before));
        },
      ),
    );
  });

  it("says whether it sits at a position, near the ends too", () => {
    const needle = new ByteNeedle("data: [DONE]", "N");
    const chunk = Buffer.from("x\n\ndata: [DONE]");
    expect(needle.at(chunk, 3)).toBe(true);
    expect(needle.at(chunk, 2)).toBe(false);
    expect(needle.at(chunk, 4)).toBe(false);
    expect(needle.at(chunk, -1)).toBe(false);
    expect(needle.in(chunk, 0, chunk.length)).toBe(3);
    expect(needle.in(chunk.subarray(0, chunk.length - 1), 0, chunk.length)).toBe(-1);
  });
});
