// The conversation fingerprint of a request: a chain of hashes, one per message, so that "this request extends
// that earlier conversation" is one comparison of the earlier hash with this request's hash at its length.
//
// Only what reaches the prompt is hashed (system prompt, tool names, each message's role, text, tool calls and
// results), read field by field from the parsed body: sampling settings, `stream`, `metadata`, `max_tokens`,
// Anthropic's moving `cache_control` marks and key order change nothing, and nothing is re-serialised.
import { finalize } from "../affinity/hash.js";
import { isRecord } from "../affinity/prefix-key.js";
import type { Endpoint } from "../gateway/completion-request.js";

/** Tags absorbed between fields: wider than 16 bits, so no run of text characters can imitate one. */
const TAG_FIELD = 0x10001;
const TAG_ITEM = 0x10002;
const TAG_PART = 0x10003;
const TAG_TOOL = 0x10004;
const TAG_HEADER = 0x10005;
/**
 * Texts up to this many UTF-16 units are hashed whole; longer ones are sampled (see ChainHasher.text). Every
 * turn hashes the whole conversation again, so this bounds the receipt's cost per message: at 256/64 a
 * 61-message conversation of 400-character turns cost 31 µs of hashing per request (bench/overhead --turns 30).
 */
const SAMPLED_TEXT_CHARS = 64;
/** Head and tail of a sampled text, hashed whole; about as many units are sampled in between. */
const EDGE_CHARS = 16;
const SEED_HI = 0x9e3779b9;
const SEED_LO = 0x85ebca6b;

export interface ConversationFingerprint {
  /** Messages (or Responses input items) of the request. */
  readonly items: number;
  /** The hash of the header and the first `count` items, as 16 hex digits (0 <= count <= items). */
  chainAt(count: number): string;
  /** Whether item `index` is the assistant's (a reply, a tool call): what a turn appends after the engine answered. */
  isReply(index: number): boolean;
  /** Responses API: the stored response this request continues (its input holds only the new items). */
  readonly previousResponseId: string | undefined;
}

/**
 * The fingerprint of a chat, Responses or Messages request; undefined for text completions (a bare prompt has
 * no turns to tell apart) and for bodies without a conversation.
 */
export function fingerprintOf(
  endpoint: Endpoint,
  body: Record<string, unknown>,
): ConversationFingerprint | undefined {
  if (endpoint === "completions") return undefined;
  const hasher = new ChainHasher();
  hasher.tag(TAG_HEADER);
  hasher.text(endpoint);
  let items: unknown;
  let previousResponseId: string | undefined;
  if (endpoint === "responses") {
    hasher.field(body["instructions"]);
    const previous = body["previous_response_id"];
    if (typeof previous === "string") previousResponseId = previous;
    const input = body["input"];
    items = typeof input === "string" ? [{ role: "user", content: input }] : input;
  } else {
    if (endpoint === "messages") hasher.content(body["system"]);
    items = body["messages"];
  }
  hasher.toolNames(body["tools"]);
  if (!Array.isArray(items)) return undefined;
  const chain = new Uint32Array(2 * (items.length + 1));
  const replies = new Uint8Array(items.length);
  hasher.snapshot(chain, 0);
  for (let i = 0; i < items.length; i++) {
    const item: unknown = items[i];
    hasher.tag(TAG_ITEM);
    if (isRecord(item)) {
      hasher.item(item);
      replies[i] = isReplyItem(item) ? 1 : 0;
    }
    hasher.snapshot(chain, i + 1);
  }
  return new ChainFingerprint(chain, replies, previousResponseId);
}

function isReplyItem(item: Record<string, unknown>): boolean {
  const role = item["role"];
  if (role !== undefined) return role === "assistant";
  const type = item["type"];
  return type === "function_call" || type === "reasoning" || type === "custom_tool_call";
}

class ChainFingerprint implements ConversationFingerprint {
  constructor(
    private readonly chain: Uint32Array,
    private readonly replies: Uint8Array,
    readonly previousResponseId: string | undefined,
  ) {}

  get items(): number {
    return this.replies.length;
  }

  chainAt(count: number): string {
    if (!Number.isInteger(count) || count < 0 || count > this.items) {
      throw new RangeError(`chainAt(${count}) outside 0..${this.items}`);
    }
    return hex8(this.chain[2 * count]!) + hex8(this.chain[2 * count + 1]!);
  }

  isReply(index: number): boolean {
    return this.replies[index] === 1;
  }
}

/** Two hex digits of every byte: a word's 8 digits are four lookups (toString(16) + padStart cost 3x more). */
const HEX_BYTE = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));

function hex8(word: number): string {
  return (
    HEX_BYTE[word >>> 24]! +
    HEX_BYTE[(word >>> 16) & 0xff]! +
    HEX_BYTE[(word >>> 8) & 0xff]! +
    HEX_BYTE[word & 0xff]!
  );
}

/**
 * Two 32-bit lanes that absorb text and tags as they are read (the lane step of src/affinity/hash.ts), and its
 * finalizer applied to a copy at each item's end, so the chain keeps running.
 */
class ChainHasher {
  private hi = SEED_HI;
  private lo = SEED_LO;

  tag(tag: number): void {
    this.hi = Math.imul(this.hi ^ tag, 0x9e3779b1);
    this.lo = Math.imul(this.lo ^ tag, 0x5f356495);
  }

  /**
   * A text, whole up to SAMPLED_TEXT_CHARS; a longer one by its head, its tail and an even sample of the rest
   * (with its length), so a turn costs in messages, not in characters: a conversation of long tool outputs
   * is read again on every turn. An edit inside a long text that keeps its length and misses the sample
   * goes unseen (the receipt then shows the loss on the same engine).
   */
  text(text: string): void {
    const length = text.length;
    if (length <= SAMPLED_TEXT_CHARS) this.units(text, 0, length, 1);
    else {
      this.units(text, 0, EDGE_CHARS, 1);
      const middle = length - 2 * EDGE_CHARS;
      this.units(text, EDGE_CHARS, length - EDGE_CHARS, Math.ceil(middle / EDGE_CHARS));
      this.units(text, length - EDGE_CHARS, length, 1);
    }
    // The length closes the text: "ab" then "c" never hashes like "a" then "bc".
    this.tag(0x20000 + text.length);
  }

  /** Absorbs text[from, to) every `step` code units. */
  private units(text: string, from: number, to: number, step: number): void {
    let hi = this.hi;
    let lo = this.lo;
    for (let i = from; i < to; i += step) {
      const unit = text.charCodeAt(i);
      hi = Math.imul(hi ^ unit, 0x9e3779b1);
      lo = Math.imul(lo ^ unit, 0x5f356495);
    }
    this.hi = hi;
    this.lo = lo;
  }

  /** A string field, or its absence (a distinct tag), closed by a field tag. */
  field(value: unknown): void {
    if (typeof value === "string") this.text(value);
    else if (typeof value === "number" || typeof value === "boolean") this.text(String(value));
    this.tag(TAG_FIELD);
  }

  /** A message content: a string, or parts/blocks (text, tool_use, tool_result, images by their source). */
  content(content: unknown): void {
    if (typeof content === "string") {
      // A string hashes as one text part: clients turn one into the other (to add cache_control marks).
      this.tag(TAG_PART);
      this.field("text");
      this.field(content);
      return this.tag(TAG_FIELD);
    }
    if (!Array.isArray(content)) return this.field(content);
    for (const part of content) {
      this.tag(TAG_PART);
      if (typeof part === "string") this.text(part);
      if (!isRecord(part)) continue;
      this.field(part["type"]);
      if (typeof part["text"] === "string") this.field(part["text"]);
      const type = part["type"];
      if (type === "tool_use") {
        this.field(part["id"]);
        this.field(part["name"]);
        // Tool inputs are small objects; the one JSON.stringify of this module.
        this.text(JSON.stringify(part["input"] ?? null));
      } else if (type === "tool_result") {
        this.field(part["tool_use_id"]);
        this.content(part["content"]);
      } else if (type === "image_url" && isRecord(part["image_url"])) {
        this.field(part["image_url"]["url"]);
      } else if (type === "image" && isRecord(part["source"])) {
        this.field(part["source"]["data"] ?? part["source"]["url"]);
      } else if (type === "input_image") {
        this.field(part["image_url"]);
      }
    }
    this.tag(TAG_FIELD);
  }

  /** One message or input item: role (or type), content, tool calls and results. */
  item(item: Record<string, unknown>): void {
    this.field(item["role"] ?? item["type"]);
    this.content(item["content"]);
    const calls = item["tool_calls"];
    if (Array.isArray(calls)) {
      for (const call of calls) {
        this.tag(TAG_TOOL);
        if (!isRecord(call)) continue;
        this.field(call["id"]);
        const fn = call["function"];
        if (isRecord(fn)) {
          this.field(fn["name"]);
          this.field(fn["arguments"]);
        }
      }
    }
    this.field(item["tool_call_id"]);
    this.field(item["name"]);
    // Responses items: function calls and their outputs.
    this.field(item["call_id"]);
    this.field(item["arguments"]);
    const output = item["output"];
    if (Array.isArray(output)) this.content(output);
    else this.field(output);
  }

  /**
   * The tools' names. Their definitions are in the prompt too, but hashing every description on every turn
   * would cost more than the rest; a tool added or removed still changes the fingerprint.
   */
  toolNames(tools: unknown): void {
    if (!Array.isArray(tools)) return;
    for (const tool of tools) {
      this.tag(TAG_TOOL);
      if (!isRecord(tool)) continue;
      const fn = tool["function"];
      this.field(isRecord(fn) ? fn["name"] : tool["name"]);
    }
  }

  /** Writes the finalized hash of everything absorbed so far into chain[2 * index], chain[2 * index + 1]. */
  snapshot(chain: Uint32Array, index: number): void {
    const { hi, lo } = finalize(this.hi, this.lo);
    chain[2 * index] = hi;
    chain[2 * index + 1] = lo;
  }
}
