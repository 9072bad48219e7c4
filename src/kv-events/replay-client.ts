// Asks an engine's replay socket (vLLM's ROUTER on `replay_endpoint`) for the batches from a sequence number on.
//
// The request is [empty frame, start_seq as 8 bytes big-endian] from a DEALER (the ROUTER adds our identity); the
// engine answers [empty, seq, payload] for every batch it still keeps with seq >= start, then [empty, -1, empty].
// A batch older than the engine's buffer (buffer_steps) is gone: the first replayed seq then exceeds `start`.
import { Dealer } from "zeromq";
import { GatewayError } from "../core/errors.js";
import { decodeSeq, encodeSeq } from "./wire.js";

export interface ReplayedBatch {
  readonly seq: bigint;
  readonly payload: Uint8Array;
}

export class ReplayError extends GatewayError {
  override name = "ReplayError";
  constructor(message: string) {
    super("kv_events_replay_failed", message);
  }
}

/** The batches from `startSeq` on, in order; throws ReplayError when the engine does not answer in `timeoutMs`. */
export async function fetchReplay(
  endpoint: string,
  startSeq: bigint,
  timeoutMs: number,
): Promise<ReplayedBatch[]> {
  const dealer = new Dealer({ linger: 0, receiveTimeout: timeoutMs, sendTimeout: timeoutMs });
  try {
    dealer.connect(endpoint);
    await dealer.send([Buffer.alloc(0), encodeSeq(startSeq)]);
    const batches: ReplayedBatch[] = [];
    for (;;) {
      let frames: Buffer[];
      try {
        frames = await dealer.receive();
      } catch (err) {
        throw new ReplayError(
          `no replay from ${endpoint}: ${err instanceof Error ? err.message : String(err)}`,
        );
      }
      // [empty, seq, payload]; tolerate a missing delimiter.
      const [seqFrame, payload] = frames.length >= 3 ? [frames[1], frames[2]] : [frames[0], frames[1]];
      if (seqFrame === undefined) throw new ReplayError(`a malformed replay message from ${endpoint}`);
      const seq = decodeSeq(seqFrame);
      if (seq < 0n) return batches;
      batches.push({ seq, payload: payload ?? Buffer.alloc(0) });
    }
  } finally {
    dealer.close();
  }
}
