// Pooled keep-alive HTTP connections to each engine (undici), one pool per backend origin.
import { Pool } from "undici";

export interface PoolSettings {
  connectTimeoutMs: number;
  connections: number;
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

export class UpstreamPools {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly settings: PoolSettings) {}

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
          keepAliveTimeout: 30_000,
        }),
      };
      this.entries.set(target.id, entry);
    }
    return entry;
  }

  /** Drops a removed backend's pool. */
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
