// A Redis connection that fails open: every call has a deadline, a failure is counted and logged once per outage.
import { createHash } from "node:crypto";
import type { ConnectionOptions } from "node:tls";
import type { Redis } from "ioredis";
import { ioredisClass } from "./ioredis-class.js";

/** What a failed-open call resolves to: the caller decides locally instead. */
export const UNAVAILABLE: unique symbol = Symbol("store unavailable");
export type Unavailable = typeof UNAVAILABLE;

/** Where the link's health goes (Prometheus in the gateway, plain counters in tests). */
export interface StoreHealthSink {
  up(up: boolean): void;
  error(): void;
}

export interface RedisLinkOptions {
  url: string;
  /** TLS options beyond the URL's scheme (redis-connection.ts): a private CA. */
  tls?: ConnectionOptions | undefined;
  timeoutMs: number;
  /** For the log lines: which store this link serves. */
  name: string;
  /**
   * Loaded on every (re)connect before the link counts as up, so EVALSHA never meets NOSCRIPT in normal
   * operation: the EVAL fallback would answer a round trip late, after commands sent behind it, and
   * write-backs must land in the order they were sent.
   */
  scripts: readonly LuaScript[];
  logger: { warn(fields: object, message: string): void; info(fields: object, message: string): void };
  health: StoreHealthSink;
}

/** A Lua script run by EVALSHA, loaded again by EVAL when the server does not know it (after its restart). */
export class LuaScript {
  readonly sha: string;
  constructor(
    readonly source: string,
    readonly keyCount: number,
  ) {
    this.sha = createHash("sha1").update(source).digest("hex");
  }
}

/** Reconnect delays grow to this and stay there: a dead Redis is retried about once a second. */
const MAX_RECONNECT_DELAY_MS = 1000;

export class RedisLink {
  readonly client: Redis;
  private healthy = false;
  private closed = false;
  private readonly readyListeners: (() => void)[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  /** The socket holds its writes until the event loop's poll phase is over (see coalesceWrites()). */
  private corked = false;

  constructor(private readonly options: RedisLinkOptions) {
    this.client = new (ioredisClass())(options.url, {
      // A command issued while disconnected fails at once instead of waiting in a queue: fail open now.
      enableOfflineQueue: false,
      commandTimeout: options.timeoutMs,
      connectTimeout: Math.max(1000, options.timeoutMs),
      maxRetriesPerRequest: 0,
      retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 10), MAX_RECONNECT_DELAY_MS),
      lazyConnect: false,
      ...(options.tls === undefined ? {} : { tls: options.tls }),
    });
    this.client.on("ready", () => void this.loadScriptsThenRecover());
    // Without a listener ioredis would print every failed reconnect; the outage is logged once instead.
    this.client.on("error", (err: Error) => this.failed(err));
    this.client.on("close", () => {
      if (!this.closed) this.failed(new Error("connection closed"));
    });
    options.health.up(false);
  }

  /** True while the last call or connection event succeeded. */
  get up(): boolean {
    return this.healthy;
  }

  /** Called each time the connection becomes ready (first connect and every reconnect). */
  onReady(listener: () => void): void {
    this.readyListeners.push(listener);
  }

  /** Runs a script; resolves UNAVAILABLE (never rejects) when Redis is down, slow past the timeout, or errs. */
  async run(
    script: LuaScript,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    if (this.client.status !== "ready") return this.unavailable(undefined);
    try {
      const reply = await this.evalScript(script, keys, args);
      if (!this.healthy) this.recovered();
      return reply;
    } catch (err) {
      return this.unavailable(err);
    }
  }

  /** Like run(), without waiting for the answer (write-backs); `onDone` gets it, or UNAVAILABLE. */
  send(
    script: LuaScript,
    keys: readonly string[],
    args: readonly (string | number)[],
    onDone?: (reply: unknown) => void,
  ): void {
    const sent = this.run(script, keys, args).then(onDone);
    this.inFlight.add(sent);
    void sent.finally(() => this.inFlight.delete(sent));
  }

  /**
   * Publishes a message on a pub/sub channel (fails open like send(): dropped when Redis is down or slow, counted
   * as an error). The promise, which never rejects, settles when Redis has answered. It says nothing of the
   * subscribers: Redis may answer the publisher before it writes the message to them.
   */
  publish(channel: string, message: string): Promise<void> {
    if (this.client.status !== "ready") {
      this.unavailable(undefined);
      return Promise.resolve();
    }
    this.coalesceWrites();
    const sent = this.client.publish(channel, message).then(
      () => undefined,
      (err: unknown) => void this.unavailable(err),
    );
    this.inFlight.add(sent);
    void sent.finally(() => this.inFlight.delete(sent));
    return sent;
  }

  /** Resolves when every send() issued so far has been answered or failed open. */
  async flush(): Promise<void> {
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  /** Resolves once connected and usable (or after `timeoutMs`, false): startup need not wait for Redis. */
  async connected(timeoutMs: number): Promise<boolean> {
    if (this.healthy) return true;
    let timer: NodeJS.Timeout | undefined;
    let listener: (() => void) | undefined;
    try {
      return await new Promise<boolean>((resolve) => {
        listener = () => resolve(true);
        this.readyListeners.push(listener);
        timer = setTimeout(() => resolve(false), timeoutMs);
      });
    } finally {
      clearTimeout(timer);
      const at = listener === undefined ? -1 : this.readyListeners.indexOf(listener);
      if (at >= 0) this.readyListeners.splice(at, 1);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.readyListeners.length = 0;
    try {
      await this.client.quit();
    } catch {
      this.client.disconnect();
    }
  }

  private async evalScript(
    script: LuaScript,
    keys: readonly string[],
    args: readonly (string | number)[],
  ): Promise<unknown> {
    try {
      this.coalesceWrites();
      return await this.client.evalsha(script.sha, script.keyCount, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith("NOSCRIPT")) throw err;
      return await this.client.eval(script.source, script.keyCount, ...keys, ...args);
    }
  }

  /**
   * Commands issued while the event loop handles one batch of ready sockets (many requests at a time
   * under load) leave in one write instead of one syscall each: the socket is corked at the first and
   * uncorked once that batch is done (setImmediate). Order and per-command timeouts are unchanged.
   */
  private coalesceWrites(): void {
    const stream = this.client.stream;
    if (this.corked || stream === undefined) return;
    this.corked = true;
    stream.cork();
    setImmediate(() => {
      this.corked = false;
      stream.uncork();
    });
  }

  private unavailable(err: unknown): Unavailable {
    this.options.health.error();
    if (err !== undefined) this.failed(err instanceof Error ? err : new Error(String(err)));
    return UNAVAILABLE;
  }

  private failed(err: Error): void {
    if (this.closed) return;
    if (this.healthy) {
      this.options.logger.warn(
        { store: this.options.name, err: err.message },
        "redis store unreachable or slow: deciding locally until it is back",
      );
    }
    this.setHealthy(false);
  }

  private async loadScriptsThenRecover(): Promise<void> {
    try {
      await Promise.all(this.options.scripts.map((script) => this.client.script("LOAD", script.source)));
    } catch (err) {
      this.failed(err instanceof Error ? err : new Error(String(err)));
      return; // the next reconnect (or a call that succeeds) tries again
    }
    this.recovered();
  }

  /** Connected again, or answering again after a slow spell: replay what waited (the listeners' job). */
  private recovered(): void {
    if (this.closed) return;
    if (!this.healthy) this.options.logger.info({ store: this.options.name }, "redis store reachable");
    this.setHealthy(true);
    for (const listener of [...this.readyListeners]) listener();
  }

  private setHealthy(up: boolean): void {
    if (this.healthy === up) return;
    this.healthy = up;
    this.options.health.up(up);
  }
}
