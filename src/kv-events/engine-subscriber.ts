// Subscribes to one engine's KV events and keeps its index current, in sequence order, replaying what it missed.
//
// ZMQ reconnects a SUB socket by itself, so a restarted engine at the same address is simply heard again; what
// the subscriber adds is order. Each batch carries a sequence number (+1 per batch from 0 at engine start):
// - the first batch heard with seq > 0, or a jump past the next expected seq: the missing batches are fetched
//   from the engine's replay socket (when it has one) and applied first;
// - on start, what the engine still keeps is fetched from the replay socket at once (what it holds is known
//   before its next batch); a batch heard live that was already applied (same seq and ts) is skipped;
// - a seq below the next expected otherwise: the engine restarted (its cache is empty): the index is cleared;
// - batches the engine no longer keeps (older than its buffer_steps), or no replay socket: the index cannot
//   know what changed, so it is cleared and rebuilt from what comes (it may under-count, never over-count).
import { Subscriber } from "zeromq";
import type { EngineIndex } from "./engine-index.js";
import { fetchReplay } from "./replay-client.js";
import { decodeKvEventBatch, decodeSeq, type DecodedBatch } from "./wire.js";

/** Batches whose ts is remembered to recognise duplicates. */
const RECENT_BATCHES = 1024;

/** A batch's ts, or NaN when it cannot be read (then it is never taken for a duplicate). */
function batchTs(payload: Uint8Array): number {
  try {
    return decodeKvEventBatch(payload).ts;
  } catch {
    return Number.NaN;
  }
}

export interface KvEventSource {
  /** The engine's PUB address (vLLM's `endpoint`, with a host the gateway can reach). */
  readonly endpoint: string;
  /** Its ROUTER for replays, when it has one. */
  readonly replayEndpoint?: string | undefined;
  /** The topic its frames carry (vLLM's `topic`; "" for every message). */
  readonly topic: string;
}

export interface SubscriberStats {
  batches: number;
  events: number;
  /** Times a gap in the sequence was seen (first contact with seq > 0 included). */
  gaps: number;
  /** Batches fetched from the replay socket and applied. */
  replayedBatches: number;
  /** Gaps the replay could not fill: the index was cleared. */
  lostGaps: number;
  /** The engine's sequence went back (a restart): the index was cleared. */
  restarts: number;
  decodeErrors: number;
  unknownEvents: number;
  /** The last applied sequence number (-1 before any). */
  lastSeq: number;
}

export interface EngineSubscriberOptions {
  readonly replayTimeoutMs: number;
  /** Something went wrong that the subscriber survived (logged by the caller). */
  readonly onError?: (err: unknown) => void;
  /** Called after each applied batch (tests wait on it; nothing in the hot path). */
  readonly onApplied?: (seq: bigint, batch: DecodedBatch) => void;
}

export class EngineSubscriber {
  private readonly socket: Subscriber;
  private expected: bigint | undefined;
  private closed = false;
  /** ts of recently applied batches by seq, to tell a duplicate (replay, then live) from a restart. */
  private readonly recentTs = new Map<bigint, number>();
  readonly stats: SubscriberStats = {
    batches: 0,
    events: 0,
    gaps: 0,
    replayedBatches: 0,
    lostGaps: 0,
    restarts: 0,
    decodeErrors: 0,
    unknownEvents: 0,
    lastSeq: -1,
  };
  /** Resolves when the receive loop has ended (after close()). */
  readonly done: Promise<void>;

  constructor(
    readonly source: KvEventSource,
    readonly index: EngineIndex,
    private readonly options: EngineSubscriberOptions,
  ) {
    this.socket = new Subscriber({ linger: 0 });
    this.socket.connect(source.endpoint);
    this.socket.subscribe(source.topic);
    this.done = this.receiveLoop();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.socket.close();
  }

  private async receiveLoop(): Promise<void> {
    if (this.source.replayEndpoint !== undefined) {
      try {
        const batches = await fetchReplay(this.source.replayEndpoint, 0n, this.options.replayTimeoutMs);
        // Only from the first batch on does the buffer say everything the engine did; otherwise start after it.
        for (const batch of batches) {
          if (this.closed) return;
          if (this.expected === undefined && batch.seq !== 0n) {
            this.stats.lostGaps += 1;
          }
          this.apply(batch.seq, batch.payload);
          this.stats.replayedBatches += 1;
        }
      } catch (err) {
        this.options.onError?.(err);
      }
    }
    try {
      for await (const frames of this.socket) {
        if (this.closed) return;
        if (frames.length < 3) {
          this.stats.decodeErrors += 1;
          continue;
        }
        let seq: bigint;
        try {
          seq = decodeSeq(frames[1] as Buffer);
        } catch (err) {
          this.stats.decodeErrors += 1;
          this.options.onError?.(err);
          continue;
        }
        await this.receive(seq, frames[2] as Buffer);
      }
    } catch (err) {
      if (!this.closed) this.options.onError?.(err);
    }
  }

  private async receive(seq: bigint, payload: Uint8Array): Promise<void> {
    if (this.expected !== undefined && seq < this.expected) {
      const seen = this.recentTs.get(seq);
      if (seen !== undefined && seen === batchTs(payload)) return; // already applied from the replay

      this.stats.restarts += 1;
      this.index.cleared();
      this.expected = 0n;
    }
    const next = this.expected ?? 0n;
    if (seq > next) {
      this.stats.gaps += 1;
      await this.fillGap(next, seq);
    }
    this.apply(seq, payload);
  }

  /** Applies batches [from, upTo) from the replay socket; clears the index when they cannot all be had. */
  private async fillGap(from: bigint, upTo: bigint): Promise<void> {
    const replayEndpoint = this.source.replayEndpoint;
    let filled = false;
    if (replayEndpoint !== undefined) {
      try {
        const batches = (await fetchReplay(replayEndpoint, from, this.options.replayTimeoutMs)).filter(
          (batch) => batch.seq < upTo,
        );
        const complete =
          batches.length === Number(upTo - from) &&
          batches.every((batch, i) => batch.seq === from + BigInt(i));
        if (complete) {
          for (const batch of batches) {
            this.apply(batch.seq, batch.payload);
            this.stats.replayedBatches += 1;
          }
          filled = true;
        }
      } catch (err) {
        this.options.onError?.(err);
      }
    }
    if (!filled) {
      this.stats.lostGaps += 1;
      this.index.cleared();
    }
  }

  private apply(seq: bigint, payload: Uint8Array): void {
    this.expected = seq + 1n;
    this.stats.lastSeq = Number(seq);
    let batch: DecodedBatch;
    try {
      batch = decodeKvEventBatch(payload);
    } catch (err) {
      // A batch we cannot read may hold removals: what the index says is no longer sure.
      this.stats.decodeErrors += 1;
      this.index.cleared();
      this.options.onError?.(err);
      return;
    }
    this.recentTs.set(seq, batch.ts);
    if (this.recentTs.size > RECENT_BATCHES)
      this.recentTs.delete(this.recentTs.keys().next().value as bigint);
    this.stats.batches += 1;
    this.stats.events += batch.events.length;
    this.stats.unknownEvents += batch.unknownEvents;
    for (const event of batch.events) {
      if (event.type === "BlockStored") this.index.stored(event);
      else if (event.type === "BlockRemoved") this.index.removed(event);
      else this.index.cleared();
    }
    this.options.onApplied?.(seq, batch);
  }
}
