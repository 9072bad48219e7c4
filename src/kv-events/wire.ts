// vLLM's KV-event wire format (vllm/distributed/kv_events.py): the event types, and their msgpack payloads in both
// encodings vLLM has shipped. One definition for the simulator that publishes and the gateway that subscribes.
//
// A ZMQ message is [topic, seq (u64 big-endian), payload]; the payload is the batch `[ts, [event...], dp_rank]`.
// - "array" (vLLM up to the May 2026 change, PR 42892): each event is a positional array, tag first
//   (`["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium, lora_name,
//   extra_keys, group_idx, kv_cache_spec_kind, kv_cache_spec_sliding_window]`), trailing default fields omitted.
// - "map" (vLLM 0.26): each event is a map with a "type" key and named fields, default-valued optional fields
//   omitted; the outer batch stays positional. `session_id` exists only in this encoding.
// The decoder takes either, per event, and a batch given as a map too; it ignores keys and trailing fields it
// does not know, and skips event tags it does not know.
import { Decoder, Encoder } from "@msgpack/msgpack";
import { GatewayError } from "../core/errors.js";

export const KV_EVENT_ENCODINGS = ["map", "array"] as const;
export type KvEventEncoding = (typeof KV_EVENT_ENCODINGS)[number];

export const MEDIUM_GPU = "GPU";

export interface BlockStored {
  readonly type: "BlockStored";
  /** Each block's hash as the wire carries it: the low 64 bits of vLLM's digest. */
  readonly blockHashes: readonly bigint[];
  /** The hash of the block before the first one here; null when the first one starts a sequence. */
  readonly parentBlockHash: bigint | null;
  /** The stored blocks' tokens, blockSize per block. */
  readonly tokenIds: readonly number[];
  readonly blockSize: number;
  readonly loraId: number | null;
  readonly medium: string | null;
  readonly loraName: string | null;
  /** Per block: the extra keys vLLM hashed in (cache_salt, LoRA name, ...), or null. */
  readonly extraKeys: readonly (readonly unknown[] | null)[] | null;
  readonly groupIdx: number | null;
  readonly kvCacheSpecKind: string | null;
  readonly kvCacheSpecSlidingWindow: number | null;
  /** The session of the request that stored the blocks (vLLM 0.26 with PR 51381), when it carried one. */
  readonly sessionId: string | null;
}

export interface BlockRemoved {
  readonly type: "BlockRemoved";
  readonly blockHashes: readonly bigint[];
  readonly medium: string | null;
  readonly groupIdx: number | null;
}

export interface AllBlocksCleared {
  readonly type: "AllBlocksCleared";
}

export type KvEvent = BlockStored | BlockRemoved | AllBlocksCleared;

export interface KvEventBatch {
  /** Seconds since the epoch, when the engine took the events (time.time()). */
  readonly ts: number;
  readonly events: readonly KvEvent[];
  readonly dataParallelRank: number | null;
}

/** A payload that is not a batch at all (the stream is not vLLM's, or is damaged). */
export class KvEventDecodeError extends GatewayError {
  override name = "KvEventDecodeError";
  constructor(message: string) {
    super("kv_events_invalid", message);
  }
}

const encoder = new Encoder({ useBigInt64: true, ignoreUndefined: true });
const decoder = new Decoder({ useBigInt64: true });

/** Python ints go out in their smallest form: a hash below 2^53 as a number, above as a 64-bit integer. */
function wireInt(value: bigint): number | bigint {
  return value <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(value) : value;
}

function wireHashes(hashes: readonly bigint[]): (number | bigint)[] {
  return hashes.map(wireInt);
}

/** Drops trailing entries equal to their default (null): msgspec's omit_defaults on an array_like struct. */
function trimTrailing(fields: unknown[], required: number): unknown[] {
  let end = fields.length;
  while (end > required && fields[end - 1] === null) end--;
  return fields.slice(0, end);
}

function eventAsArray(event: KvEvent): unknown[] {
  switch (event.type) {
    case "BlockStored":
      return trimTrailing(
        [
          "BlockStored",
          wireHashes(event.blockHashes),
          event.parentBlockHash === null ? null : wireInt(event.parentBlockHash),
          event.tokenIds,
          event.blockSize,
          event.loraId,
          event.medium,
          event.loraName,
          event.extraKeys,
          event.groupIdx,
          event.kvCacheSpecKind,
          event.kvCacheSpecSlidingWindow,
        ],
        8,
      );
    case "BlockRemoved":
      return trimTrailing(["BlockRemoved", wireHashes(event.blockHashes), event.medium, event.groupIdx], 3);
    case "AllBlocksCleared":
      return ["AllBlocksCleared"];
  }
}

function eventAsMap(event: KvEvent): Record<string, unknown> {
  switch (event.type) {
    case "BlockStored": {
      const map: Record<string, unknown> = {
        type: "BlockStored",
        block_hashes: wireHashes(event.blockHashes),
        parent_block_hash: event.parentBlockHash === null ? null : wireInt(event.parentBlockHash),
        token_ids: event.tokenIds,
        block_size: event.blockSize,
        lora_id: event.loraId,
        medium: event.medium,
        lora_name: event.loraName,
      };
      // Fields with a default are omitted when they hold it (msgspec omit_defaults).
      if (event.extraKeys !== null) map["extra_keys"] = event.extraKeys;
      if (event.groupIdx !== null) map["group_idx"] = event.groupIdx;
      if (event.kvCacheSpecKind !== null) map["kv_cache_spec_kind"] = event.kvCacheSpecKind;
      if (event.kvCacheSpecSlidingWindow !== null)
        map["kv_cache_spec_sliding_window"] = event.kvCacheSpecSlidingWindow;
      if (event.sessionId !== null) map["session_id"] = event.sessionId;
      return map;
    }
    case "BlockRemoved": {
      const map: Record<string, unknown> = {
        type: "BlockRemoved",
        block_hashes: wireHashes(event.blockHashes),
        medium: event.medium,
      };
      if (event.groupIdx !== null) map["group_idx"] = event.groupIdx;
      return map;
    }
    case "AllBlocksCleared":
      return { type: "AllBlocksCleared" };
  }
}

/** The msgpack payload of one batch, in the chosen encoding of its events. */
export function encodeKvEventBatch(batch: KvEventBatch, encoding: KvEventEncoding): Uint8Array {
  const encode: (event: KvEvent) => unknown = encoding === "map" ? eventAsMap : eventAsArray;
  const events = batch.events.map(encode);
  return encoder.encode([batch.ts, events, batch.dataParallelRank]);
}

// ---- decoding ----

function isRecord(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Uint8Array)
  );
}

/** A block hash in any form vLLM sends: an int (number or bigint), or the digest bytes (int hashes turned off). */
function blockHash(value: unknown, where: string): bigint {
  if (typeof value === "bigint") return BigInt.asUintN(64, value);
  if (typeof value === "number" && Number.isInteger(value)) return BigInt.asUintN(64, BigInt(value));
  if (value instanceof Uint8Array && value.length >= 8) {
    return Buffer.from(value.buffer, value.byteOffset, value.length).readBigUInt64BE(value.length - 8);
  }
  throw new KvEventDecodeError(`${where}: not a block hash`);
}

function hashList(value: unknown, where: string): bigint[] {
  if (!Array.isArray(value)) throw new KvEventDecodeError(`${where}: not a list of block hashes`);
  return value.map((item) => blockHash(item, where));
}

function intOrNull(value: unknown): number | null {
  if (typeof value === "number" && Number.isInteger(value)) return value;
  if (typeof value === "bigint") return Number(value);
  return null;
}

function stringOrNull(value: unknown): string | null {
  return typeof value === "string" ? value : null;
}

function tokenList(value: unknown): number[] {
  if (!Array.isArray(value)) throw new KvEventDecodeError("BlockStored.token_ids: not a list");
  return value.map((token) => {
    const id = intOrNull(token);
    if (id === null) throw new KvEventDecodeError("BlockStored.token_ids: not a token id");
    return id;
  });
}

function extraKeysOf(value: unknown): (readonly unknown[] | null)[] | null {
  if (!Array.isArray(value)) return null;
  return value.map((entry) => (Array.isArray(entry) ? (entry as unknown[]) : null));
}

interface StoredFields {
  block_hashes: unknown;
  parent_block_hash: unknown;
  token_ids: unknown;
  block_size: unknown;
  lora_id?: unknown;
  medium?: unknown;
  lora_name?: unknown;
  extra_keys?: unknown;
  group_idx?: unknown;
  kv_cache_spec_kind?: unknown;
  kv_cache_spec_sliding_window?: unknown;
  session_id?: unknown;
}

function blockStored(fields: StoredFields): BlockStored {
  const blockSize = intOrNull(fields.block_size);
  if (blockSize === null || blockSize < 1) throw new KvEventDecodeError("BlockStored.block_size: not a size");
  return {
    type: "BlockStored",
    blockHashes: hashList(fields.block_hashes, "BlockStored.block_hashes"),
    parentBlockHash:
      fields.parent_block_hash === null || fields.parent_block_hash === undefined
        ? null
        : blockHash(fields.parent_block_hash, "BlockStored.parent_block_hash"),
    tokenIds: tokenList(fields.token_ids),
    blockSize,
    loraId: intOrNull(fields.lora_id),
    medium: stringOrNull(fields.medium),
    loraName: stringOrNull(fields.lora_name),
    extraKeys: extraKeysOf(fields.extra_keys),
    groupIdx: intOrNull(fields.group_idx),
    kvCacheSpecKind: stringOrNull(fields.kv_cache_spec_kind),
    kvCacheSpecSlidingWindow: intOrNull(fields.kv_cache_spec_sliding_window),
    sessionId: stringOrNull(fields.session_id),
  };
}

/** One event, or undefined for a tag this decoder does not know (a newer vLLM's event). */
function decodeEvent(raw: unknown): KvEvent | undefined {
  if (Array.isArray(raw)) {
    const [tag, ...f] = raw as unknown[];
    switch (tag) {
      case "BlockStored":
        return blockStored({
          block_hashes: f[0],
          parent_block_hash: f[1],
          token_ids: f[2],
          block_size: f[3],
          lora_id: f[4],
          medium: f[5],
          lora_name: f[6],
          extra_keys: f[7],
          group_idx: f[8],
          kv_cache_spec_kind: f[9],
          kv_cache_spec_sliding_window: f[10],
        });
      case "BlockRemoved":
        return {
          type: "BlockRemoved",
          blockHashes: hashList(f[0], "BlockRemoved.block_hashes"),
          medium: stringOrNull(f[1]),
          groupIdx: intOrNull(f[2]),
        };
      case "AllBlocksCleared":
        return { type: "AllBlocksCleared" };
      default:
        return undefined;
    }
  }
  if (isRecord(raw)) {
    switch (raw["type"]) {
      case "BlockStored":
        return blockStored(raw as unknown as StoredFields);
      case "BlockRemoved":
        return {
          type: "BlockRemoved",
          blockHashes: hashList(raw["block_hashes"], "BlockRemoved.block_hashes"),
          medium: stringOrNull(raw["medium"]),
          groupIdx: intOrNull(raw["group_idx"]),
        };
      case "AllBlocksCleared":
        return { type: "AllBlocksCleared" };
      default:
        return undefined;
    }
  }
  throw new KvEventDecodeError("an event is neither an array nor a map");
}

export interface DecodedBatch extends KvEventBatch {
  /** Events whose tag this decoder does not know (skipped). */
  readonly unknownEvents: number;
}

/** Decodes one payload; throws KvEventDecodeError when it is not a batch of events. */
export function decodeKvEventBatch(payload: Uint8Array): DecodedBatch {
  let raw: unknown;
  try {
    raw = decoder.decode(payload);
  } catch (err) {
    throw new KvEventDecodeError(`not msgpack: ${err instanceof Error ? err.message : String(err)}`);
  }
  let ts: unknown;
  let rawEvents: unknown;
  let rank: unknown;
  if (Array.isArray(raw)) [ts, rawEvents, rank] = raw as unknown[];
  else if (isRecord(raw)) {
    ts = raw["ts"];
    rawEvents = raw["events"];
    rank = raw["data_parallel_rank"];
  } else throw new KvEventDecodeError("a batch is neither an array nor a map");
  if (!Array.isArray(rawEvents)) throw new KvEventDecodeError("a batch has no list of events");
  const events: KvEvent[] = [];
  let unknownEvents = 0;
  for (const item of rawEvents) {
    const event = decodeEvent(item);
    if (event === undefined) unknownEvents += 1;
    else events.push(event);
  }
  return {
    ts: typeof ts === "number" ? ts : typeof ts === "bigint" ? Number(ts) : 0,
    events,
    dataParallelRank: intOrNull(rank),
    unknownEvents,
  };
}

/** The sequence number frame: a u64, big-endian. */
export function encodeSeq(seq: bigint): Buffer {
  const frame = Buffer.alloc(8);
  frame.writeBigUInt64BE(BigInt.asUintN(64, seq));
  return frame;
}

/** Reads a sequence frame as a signed value, so the replay's end marker (-1) reads as -1n. */
export function decodeSeq(frame: Uint8Array): bigint {
  if (frame.length !== 8) throw new KvEventDecodeError(`a sequence frame has ${frame.length} bytes, not 8`);
  return Buffer.from(frame.buffer, frame.byteOffset, 8).readBigInt64BE(0);
}
