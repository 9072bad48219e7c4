// The simulator's tokenizer: a deterministic stand-in for a BPE vocabulary at about 4 characters per token.
//
// A real BPE (Qwen2.5's 151k-token vocabulary) is not on npm in a form cheap enough for the hot path, so text is cut
// into fixed 4-code-unit pieces and each piece is hashed to an id below Qwen2.5's first special token. This keeps
// the two properties prefix caching depends on: the same text always gives the same ids, and text tokenized in
// separate segments (chat messages) gives ids that are a prefix of any longer conversation that starts with them.
// Generated text is built from exactly-4-character pieces, so re-tokenizing a reply gives back the same ids.
import { SIM_DEFAULTS } from "./defaults.js";

/** Qwen2.5's special token ids, so traces look like the real model's. */
export const SPECIAL_TOKENS = {
  endOfText: 151_643,
  imStart: 151_644,
  imEnd: 151_645,
} as const;

/** Ordinary token ids are in [0, this). */
export const REGULAR_VOCAB_SIZE = 151_643;
export { VOCAB_SIZE } from "../surface/vocab.js";

const CHARS_PER_TOKEN = SIM_DEFAULTS.charsPerToken;

/** The id of text[start, end): FNV-1a over the UTF-16 code units, then a murmur finalizer. */
export function pieceId(text: string, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  return (h >>> 0) % REGULAR_VOCAB_SIZE;
}

/**
 * Appends the ids of `text` to `out`: pieceId of each 4-code-unit piece, the last one shorter. Written out for
 * whole pieces (the gateway renders every prompt it places by KV events, 0.5 MB of text for a coding agent's
 * 130k-token prompt; bench/README.md, "Long prompts"): about half the time of a pieceId call per piece.
 */
export function encodeInto(text: string, out: number[]): void {
  const length = text.length;
  let i = 0;
  if (CHARS_PER_TOKEN === 4) {
    for (; i + 4 <= length; i += 4) {
      let h = Math.imul(0x811c9dc5 ^ text.charCodeAt(i), 0x01000193);
      h = Math.imul(h ^ text.charCodeAt(i + 1), 0x01000193);
      h = Math.imul(h ^ text.charCodeAt(i + 2), 0x01000193);
      h = Math.imul(h ^ text.charCodeAt(i + 3), 0x01000193);
      h ^= h >>> 16;
      h = Math.imul(h, 0x85ebca6b);
      h ^= h >>> 13;
      out.push((h >>> 0) % REGULAR_VOCAB_SIZE);
    }
  }
  for (; i < length; i += CHARS_PER_TOKEN) out.push(pieceId(text, i, Math.min(i + CHARS_PER_TOKEN, length)));
}

export function encode(text: string): number[] {
  const out: number[] = [];
  encodeInto(text, out);
  return out;
}

export function countTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}
