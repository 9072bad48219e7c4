// Pooled keep-alive HTTP connections to each engine (undici), one pool per backend origin.
import { Client, Pool, type Dispatcher } from "undici";

export interface PoolSettings {
  connectTimeoutMs: number;
  connections: number;
  /**
   * Idle connections are closed after this. It must stay below the engines' own keep-alive (uvicorn, under
   * vLLM, closes idle connections after 5 s): a connection the engine closes while we still count it as
   * idle is one the next request finds reset.
   */
  idleTimeoutMs: number;
}

export interface UpstreamTarget {
  readonly id: string;
  baseUrl: string;
}

interface Entry {
  baseUrl: string;
  origin: string;
  /** Path prefix of base_url ("" or "/something"), prepended to every request path. */
  basePath: string;
  pool: Pool;
}

/** A connection of its own for one request, closed when that request is done. */
export interface FreshConnection {
  dispatcher: Dispatcher;
  basePath: string;
  close(): void;
}

export class UpstreamPools {
  private readonly entries = new Map<string, Entry>();

  constructor(private settings: PoolSettings) {}

  /**
   * Reloaded pool settings: each backend's next request gets a pool made with them. The old pools close
   * gracefully (their requests in flight finish on them).
   */
  configure(settings: PoolSettings): void {
    const same =
      settings.connectTimeoutMs === this.settings.connectTimeoutMs &&
      settings.connections === this.settings.connections &&
      settings.idleTimeoutMs === this.settings.idleTimeoutMs;
    this.settings = settings;
    if (same) return;
    for (const entry of this.entries.values()) void entry.pool.close().catch(() => undefined);
    this.entries.clear();
  }

  /** The settings pools are made with now. */
  get current(): PoolSettings {
    return this.settings;
  }

  /** The pool and path prefix for a backend; a changed base_url (reload) gets a fresh pool. */
  get(target: UpstreamTarget): { pool: Pool; basePath: string } {
    let entry = this.entries.get(target.id);
    if (entry === undefined || entry.baseUrl !== target.baseUrl) {
      if (entry !== undefined) void entry.pool.close().catch(() => undefined);
      const url = new URL(target.baseUrl);
      entry = {
        baseUrl: target.baseUrl,
        origin: url.origin,
        basePath: url.pathname.replace(/\/+$/, ""),
        pool: new Pool(url.origin, {
          connections: this.settings.connections,
          pipelining: 1,
          connect: { timeout: this.settings.connectTimeoutMs, noDelay: true },
          keepAliveTimeout: this.settings.idleTimeoutMs,
          // An engine's Keep-Alive hint may shorten it, never lengthen it past ours.
          keepAliveMaxTimeout: this.settings.idleTimeoutMs,
          keepAliveTimeoutThreshold: Math.min(1000, this.settings.idleTimeoutMs / 2),
        }),
      };
      this.entries.set(target.id, entry);
    }
    return entry;
  }

  /**
   * A new connection to the backend, never a pooled one: the retry of a request whose reused connection
   * was found closed before any answer.
   */
  fresh(target: UpstreamTarget): FreshConnection {
    const url = new URL(target.baseUrl);
    const client = new Client(url.origin, {
      pipelining: 1,
      connect: { timeout: this.settings.connectTimeoutMs, noDelay: true },
    });
    return {
      dispatcher: client,
      basePath: url.pathname.replace(/\/+$/, ""),
      close: () => void client.close().catch(() => undefined),
    };
  }

  /**
   * Takes a removed backend's pool out without closing it: the caller drains it (backend-drain.ts). The next
   * get() for that id makes a fresh pool.
   */
  detach(id: string): Pool | undefined {
    const entry = this.entries.get(id);
    this.entries.delete(id);
    return entry?.pool;
  }

  /** Drops a removed backend's pool, cutting what runs on it. */
  drop(id: string): void {
    const entry = this.entries.get(id);
    if (entry === undefined) return;
    this.entries.delete(id);
    void entry.pool.destroy().catch(() => undefined);
  }

  async close(): Promise<void> {
    const pools = [...this.entries.values()].map((e) => e.pool);
    this.entries.clear();
    await Promise.all(pools.map((pool) => pool.destroy().catch(() => undefined)));
  }
}
