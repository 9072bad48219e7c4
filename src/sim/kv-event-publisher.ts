// Publishes the simulated engine's KV events over ZMQ exactly as vLLM's ZmqEventPublisher does.
//
// PUB frames [topic, seq (u64 big-endian, from 0, +1 per batch), msgpack batch]; the last `buffer_steps` batches
// are kept, and a ROUTER on `replay_endpoint` answers a request [identity, "", start_seq (8 bytes big-endian)] with
// [identity, "", seq, payload] for each kept batch with seq >= start, then [identity, "", -1 (8 bytes), ""].
// ZMQ allows one send at a time per socket, so batches go out through a queue, in order; a full queue (more than
// max_queue_size batches waiting) drops the newest batch, as vLLM's bounded queue would block the engine instead.
import { Publisher, Router } from "zeromq";
import type { Clock } from "../core/clock.js";
import { encodeKvEventBatch, encodeSeq, type KvEvent, type KvEventEncoding } from "../kv-events/wire.js";
import { shouldBind, type KvEventsConfig } from "./kv-events-config.js";

const END_SEQ = encodeSeq(-1n);
const EMPTY = Buffer.alloc(0);

export interface KvEventPublisherOptions {
  readonly config: KvEventsConfig;
  readonly encoding: KvEventEncoding;
  /** Wall clock of the batches' `ts`. */
  readonly clock: Clock;
  readonly dataParallelRank?: number;
  /** A send or replay failed (logged by the caller; the publisher goes on). */
  readonly onError?: (err: unknown) => void;
}

export class KvEventPublisher {
  private readonly pub: Publisher;
  private readonly router: Router | undefined;
  private readonly topic: Buffer;
  private nextSeq = 0n;
  private readonly buffer: { seq: bigint; payload: Uint8Array }[] = [];
  private readonly queue: Buffer[][] = [];
  private sending = false;
  private closed = false;
  /** Batches dropped because the send queue was full. */
  droppedBatches = 0;
  /** The PUB address actually bound or connected (a port 0 resolved). */
  endpoint = "";
  replayEndpoint: string | undefined;

  private constructor(private readonly options: KvEventPublisherOptions) {
    this.pub = new Publisher({ sendHighWaterMark: options.config.hwm, linger: 0 });
    this.router = options.config.replayEndpoint === undefined ? undefined : new Router({ linger: 0 });
    this.topic = Buffer.from(options.config.topic, "utf8");
  }

  static async start(options: KvEventPublisherOptions): Promise<KvEventPublisher> {
    const publisher = new KvEventPublisher(options);
    try {
      await publisher.open();
    } catch (err) {
      publisher.close();
      throw err;
    }
    return publisher;
  }

  private async open(): Promise<void> {
    const { endpoint, replayEndpoint } = this.options.config;
    if (shouldBind(endpoint)) {
      await this.pub.bind(endpoint);
      this.endpoint = this.pub.lastEndpoint ?? endpoint;
    } else {
      this.pub.connect(endpoint);
      this.endpoint = endpoint;
    }
    if (this.router !== undefined && replayEndpoint !== undefined) {
      await this.router.bind(replayEndpoint);
      this.replayEndpoint = this.router.lastEndpoint ?? replayEndpoint;
      void this.serveReplays(this.router);
    }
  }

  /** Publishes one batch of events (nothing when there are none, as vLLM's scheduler skips empty steps). */
  publish(events: readonly KvEvent[]): void {
    if (events.length === 0 || this.closed) return;
    if (this.queue.length >= this.options.config.maxQueueSize) {
      this.droppedBatches += 1;
      return;
    }
    const payload = encodeKvEventBatch(
      {
        ts: this.options.clock.nowMs() / 1000,
        events,
        dataParallelRank: this.options.dataParallelRank ?? 0,
      },
      this.options.encoding,
    );
    const seq = this.nextSeq;
    this.nextSeq += 1n;
    this.buffer.push({ seq, payload });
    if (this.buffer.length > this.options.config.bufferSteps) this.buffer.shift();
    this.queue.push([
      this.topic,
      encodeSeq(seq),
      Buffer.from(payload.buffer, payload.byteOffset, payload.length),
    ]);
    if (!this.sending) void this.drain();
  }

  private async drain(): Promise<void> {
    this.sending = true;
    while (this.queue.length > 0 && !this.closed) {
      const frames = this.queue.shift() as Buffer[];
      try {
        await this.pub.send(frames);
      } catch (err) {
        if (!this.closed) this.options.onError?.(err);
      }
    }
    this.sending = false;
  }

  private async serveReplays(router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        if (frames.length !== 3) continue; // vLLM logs and ignores a malformed request
        const [identity, , start] = frames as [Buffer, Buffer, Buffer];
        const startSeq = start.length === 8 ? start.readBigUInt64BE(0) : 0n;
        for (const { seq, payload } of this.buffer.slice()) {
          if (seq >= startSeq) await router.send([identity, EMPTY, encodeSeq(seq), payload]);
        }
        await router.send([identity, EMPTY, END_SEQ, EMPTY]);
      }
    } catch (err) {
      if (!this.closed) this.options.onError?.(err);
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.pub.close();
    this.router?.close();
  }
}
