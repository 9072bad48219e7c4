// Deterministic pseudo-text for replies, and how long a reply is when the request does not say.
//
// Every piece is exactly four characters, so the tokenizer maps a reply sent back in the next turn to the very ids
// the engine generated (and cached). Pieces are short words with a leading space, a few ending in punctuation.
import type { Random } from "../core/random.js";
import { SIM_DEFAULTS } from "./defaults.js";
import type { StopDistribution } from "./profiles.js";
import { SPECIAL_TOKENS, pieceId } from "./tokenizer.js";

const WORDS = (
  "the and for you can not one all use its new now way may see get how our out day two has was who did key set " +
  "run log map row job raw end top add fix put let ask try big old low few own per via yet due far net box bit " +
  "tag api cpu gpu ram ssd url id: ok, so, it, go. is. up. on. at. do. be. to. no. we, as, if,"
)
  .split(" ")
  .filter((word) => word.length > 0);

/** The generator's vocabulary: each piece is exactly 4 characters. */
export const REPLY_PIECES: readonly string[] = WORDS.map((word) => ` ${word}`.padEnd(4, " ").slice(0, 4));
const REPLY_PIECE_IDS: readonly number[] = REPLY_PIECES.map((piece) => pieceId(piece, 0, piece.length));

/** One reply token: its id for the KV cache and its text for the client (empty for the end-of-turn token). */
export interface ReplyToken {
  id: number;
  text: string;
}

const END_OF_TURN: ReplyToken = { id: SPECIAL_TOKENS.imEnd, text: "" };

/** Where a request's reply tokens come from, one at a time and in order. */
export interface ReplySource {
  token(index: number): ReplyToken;
}

/** Draws the reply one token at a time; `endsWithStop` makes the last token the end-of-turn token. */
export class ReplyGenerator implements ReplySource {
  constructor(
    private readonly random: Random,
    private readonly lengthTokens: number,
    private readonly endsWithStop: boolean,
  ) {}

  /** The token at position `index` (0-based); callers ask in order. */
  token(index: number): ReplyToken {
    if (this.endsWithStop && index === this.lengthTokens - 1) return END_OF_TURN;
    const pick = Math.floor(this.random.next() * REPLY_PIECES.length);
    return { id: REPLY_PIECE_IDS[pick] as number, text: REPLY_PIECES[pick] as string };
  }
}

/**
 * A reply whose text is fixed in advance (a tool call, structured output): its 4-character pieces, then
 * end-of-turn. The pieces are exactly what the tokenizer makes of the same text, so the text sent back in the next
 * turn re-tokenizes to the ids the engine generated.
 */
export class ScriptedReply implements ReplySource {
  private readonly pieces: string[] = [];

  constructor(text: string) {
    for (let i = 0; i < text.length; i += SIM_DEFAULTS.charsPerToken) {
      this.pieces.push(text.slice(i, i + SIM_DEFAULTS.charsPerToken));
    }
  }

  /** Tokens of the whole reply, end-of-turn included. */
  get lengthTokens(): number {
    return this.pieces.length + 1;
  }

  token(index: number): ReplyToken {
    const piece = this.pieces[index];
    if (piece === undefined) return END_OF_TURN;
    return { id: pieceId(piece, 0, piece.length), text: piece };
  }
}

/** A standard normal draw (Box-Muller). */
function normal(random: Random): number {
  const u1 = 1 - random.next();
  const u2 = random.next();
  return Math.sqrt(-2 * Math.log(u1)) * Math.cos(2 * Math.PI * u2);
}

/** Tokens until the model would emit end-of-turn: log-normal around the profile's median, at least 1. */
export function sampleStopLength(random: Random, stop: StopDistribution): number {
  return Math.max(1, Math.round(stop.medianTokens * Math.exp(stop.sigma * normal(random))));
}

/** 32-bit mix of seeds, so per-request generators are independent yet reproducible. */
export function mixSeed(...parts: number[]): number {
  let h = 0x9e3779b9;
  for (const part of parts) {
    const low = part >>> 0;
    const high = Math.floor(part / 4294967296) >>> 0;
    h ^= Math.imul(low ^ Math.imul(high, 0x27d4eb2f), 0x85ebca6b);
    h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d);
    h ^= h >>> 12;
  }
  return h >>> 0;
}
