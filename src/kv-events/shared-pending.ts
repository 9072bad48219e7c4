// Replicas tell each other the prompts they send engines that publish KV events: each one's pending blocks and
// prefill work ahead then cover the whole fleet's sends, not a third of them (docs/kv-events.md, "Shared pending").
//
// Why: an engine reports a block only once it has computed it, so a replica that sees only its own sends predicts
// a miss for a prefix another replica's request is computing there, and forecasts no eviction for prefill other
// replicas queued ahead of its request (measured: the kvevents study's 3-replica misses). A send travels once, when
// the request is sent, and an end when it ends; only the blocks the sender did not find held or pending travel,
// with the content key of the block before them (the anchor): a continued turn's message carries its new tool
// result, not its 150k-token history. Messages are JSON on one pub/sub channel; a lost one costs accuracy only
// (entries expire after the pending TTL), never correctness.
import { GatewayError } from "../core/errors.js";

/** A prompt a replica sent an engine: the blocks from `offset` on, the ones it did not find there. */
export interface SharedSend {
  readonly kind: "sent";
  /** The sending replica (random per process: its own messages come back to it and are skipped). */
  readonly replica: string;
  /** The send's number at its replica (the end names it). */
  readonly id: number;
  readonly engine: string;
  /** Leading blocks held or pending on the engine when it was sent (not carried). */
  readonly offset: number;
  /** Content key of block `offset - 1`; absent when offset is 0. */
  readonly anchor: number | undefined;
  /** Content keys of blocks offset.. of the prompt. */
  readonly tailKeys: readonly number[];
  readonly promptTokens: number;
  readonly blockSizeTokens: number;
}

/** The request of a SharedSend ended (answered, failed, cancelled). */
export interface SharedEnd {
  readonly kind: "ended";
  readonly replica: string;
  readonly id: number;
  readonly engine: string;
}

export type SharedPendingMessage = SharedSend | SharedEnd;

/** Where a view publishes its sends, and what it calls when the fleet's messages arrive (a Redis channel). */
export interface PendingShare {
  /**
   * Settles (never rejects) once the channel has the message, or it was dropped (Redis away). Subscribers, this
   * replica's own among them, get it in the channel's order: the view's cue that the sends before it are in.
   */
  publish(message: SharedPendingMessage): Promise<void>;
  /** Whether this replica hears the channel now (its own messages come back to it). */
  readonly hearing: boolean;
  close(): Promise<void>;
}

export function encodeSharedPending(message: SharedPendingMessage): string {
  return message.kind === "sent"
    ? JSON.stringify({
        k: "s",
        r: message.replica,
        i: message.id,
        e: message.engine,
        o: message.offset,
        a: message.anchor ?? null,
        t: message.promptTokens,
        b: message.blockSizeTokens,
        h: message.tailKeys,
      })
    : JSON.stringify({ k: "e", r: message.replica, i: message.id, e: message.engine });
}

function isCount(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

/** Decodes a message; a malformed one is an error (the caller counts and skips it). */
export function decodeSharedPending(text: string): SharedPendingMessage {
  const bad = (why: string): GatewayError =>
    new GatewayError("kv_shared_pending_invalid", `a shared pending-blocks message ${why}`);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw bad("is not JSON");
  }
  if (typeof value !== "object" || value === null) throw bad("is not an object");
  const m = value as Record<string, unknown>;
  const { r: replica, i: id, e: engine } = m;
  if (typeof replica !== "string" || typeof engine !== "string" || !isCount(id))
    throw bad("lacks its replica, id or engine");
  if (m["k"] === "e") return { kind: "ended", replica, id, engine };
  if (m["k"] !== "s") throw bad("has an unknown kind");
  const { o: offset, a: anchor, t: promptTokens, b: blockSizeTokens, h: tailKeys } = m;
  if (!isCount(offset) || !isCount(promptTokens) || !isCount(blockSizeTokens) || blockSizeTokens === 0)
    throw bad("has a bad offset, prompt length or block size");
  if ((offset === 0) !== (anchor === null) || (anchor !== null && typeof anchor !== "number"))
    throw bad("has an anchor that does not fit its offset");
  if (!Array.isArray(tailKeys) || !tailKeys.every((key) => typeof key === "number"))
    throw bad("has bad block keys");
  return {
    kind: "sent",
    replica,
    id,
    engine,
    offset,
    anchor: anchor ?? undefined,
    tailKeys: tailKeys as number[],
    promptTokens,
    blockSizeTokens,
  };
}
