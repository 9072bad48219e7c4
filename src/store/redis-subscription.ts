// One Redis pub/sub channel on a connection of its own: the invalidations that let a replica trust its cache.
import type { ConnectionOptions } from "node:tls";
import type { Redis } from "ioredis";
import { ioredisClass } from "./ioredis-class.js";

/** Reconnect delays grow to this and stay there (as the command link's do). */
const MAX_RECONNECT_DELAY_MS = 1000;

/**
 * Subscribed while `live` is true. Every message is handed to the listener; whenever the connection drops,
 * `onLost` runs first (messages may have been missed meanwhile, so whatever they would have invalidated
 * must be dropped), and `live` turns true again only once the channel is subscribed anew.
 */
export class RedisSubscription {
  private readonly client: Redis;
  private subscribed = false;
  private closed = false;
  private readonly liveListeners: (() => void)[] = [];

  constructor(
    url: string,
    private readonly channel: string,
    private readonly onMessage: (message: string) => void,
    private readonly onLost: () => void,
    /** TLS options beyond the URL's scheme (redis-connection.ts): a private CA. */
    tls?: ConnectionOptions,
  ) {
    this.client = new (ioredisClass())(url, {
      enableOfflineQueue: true,
      // Subscribed here on every ready event, so that `live` follows the subscription, not the socket.
      autoResubscribe: false,
      maxRetriesPerRequest: null,
      retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 10), MAX_RECONNECT_DELAY_MS),
      ...(tls === undefined ? {} : { tls }),
    });
    this.client.on("ready", () => void this.subscribe());
    this.client.on("message", (from: string, message: string) => {
      if (from === this.channel) this.onMessage(message);
    });
    // The command link logs outages; errors here only mean the same outage.
    this.client.on("error", () => this.lost());
    this.client.on("close", () => this.lost());
  }

  get live(): boolean {
    return this.subscribed;
  }

  /** Resolves once subscribed (at once if it is). */
  whenLive(): Promise<void> {
    if (this.subscribed) return Promise.resolve();
    return new Promise((resolve) => this.liveListeners.push(resolve));
  }

  /** Disconnects at once (no QUIT: with Redis down it would wait in the offline queue, and nothing is owed). */
  close(): Promise<void> {
    this.closed = true;
    this.subscribed = false;
    this.client.disconnect();
    return Promise.resolve();
  }

  private async subscribe(): Promise<void> {
    try {
      await this.client.subscribe(this.channel);
      if (this.closed) return;
      this.subscribed = true;
      for (const listener of this.liveListeners.splice(0)) listener();
    } catch {
      this.lost();
    }
  }

  private lost(): void {
    if (!this.subscribed) return;
    this.subscribed = false;
    this.onLost();
  }
}
