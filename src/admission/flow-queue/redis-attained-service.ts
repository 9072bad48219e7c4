// Attained service shared by the replicas through Redis: each adds what it served, every sync interval, and
// adopts the replicas' total; failing open to its own counts (each replica always schedules its own queue).
import type { GatewayConfig } from "../../config/schema.js";
import type { Timers } from "../../core/clock.js";
import { redisConnection } from "../../store/redis-connection.js";
import { LuaScript, RedisLink, UNAVAILABLE, type RedisLinkOptions } from "../../store/redis-link.js";
import type { AttainedService } from "./attained-service.js";

/**
 * ARGV: nowMs, halfLifeMs, ttlMs, n, then n keys, then their n deltas (the keys travel in ARGV because a
 * script's key count is fixed; one Redis, not a cluster, is what admission.store names). Each key is a hash {v, t}: the
 * flow's service v at time t; it is decayed to now (the caller's clock), the delta added, and written back.
 * Returns the new values, as strings (Redis truncates Lua numbers to integers).
 */
const ADD_DECAYED = new LuaScript(
  `
local now = tonumber(ARGV[1])
local halfLife = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local out = {}
for i = 1, n do
  local key = ARGV[4 + i]
  local stored = redis.call('HMGET', key, 'v', 't')
  local v = tonumber(stored[1]) or 0
  local t = tonumber(stored[2]) or now
  local age = math.max(0, now - t)
  v = math.max(0, v * math.pow(2, -age / halfLife) + tonumber(ARGV[4 + n + i]))
  redis.call('HSET', key, 'v', tostring(v), 't', tostring(now))
  redis.call('PEXPIRE', key, ttl)
  out[i] = tostring(v)
end
return out
`,
  0,
);

/** Flows written per call at most: one script call stays short for Redis (it runs alone while it runs). */
const MAX_FLOWS_PER_CALL = 500;

export interface SharedServiceOptions {
  link: Omit<RedisLinkOptions, "name" | "scripts">;
  keyPrefix: string;
  syncIntervalMs: number;
  halfLifeMs: number;
}

export class RedisAttainedService {
  private readonly link: RedisLink;
  private cancel: (() => void) | undefined;
  private syncing = false;

  constructor(
    private readonly service: AttainedService,
    private readonly options: SharedServiceOptions,
    private readonly clock: { nowMs(): number },
    private readonly timers: Timers,
  ) {
    this.link = new RedisLink({ ...options.link, name: "flows", scripts: [ADD_DECAYED] });
    this.schedule();
  }

  /** Adds this replica's service since the last sync to the shared counters and adopts their totals. */
  async sync(): Promise<void> {
    if (this.syncing) return;
    this.syncing = true;
    try {
      const deltas = [...this.service.takeUnsynced()];
      for (let at = 0; at < deltas.length; at += MAX_FLOWS_PER_CALL) {
        const batch = deltas.slice(at, at + MAX_FLOWS_PER_CALL);
        const reply = await this.link.run(
          ADD_DECAYED,
          [],
          [
            this.clock.nowMs(),
            this.options.halfLifeMs,
            // A flow idle for 20 half-lives has a millionth of its service left: its key goes.
            Math.ceil(this.options.halfLifeMs * 20),
            batch.length,
            ...batch.map(([flow]) => this.options.keyPrefix + flow),
            ...batch.map(([, tokens]) => tokens),
          ],
        );
        if (reply === UNAVAILABLE || !Array.isArray(reply)) {
          // Fail open: this replica goes on with its own counts, and tries these deltas again next time.
          this.service.returnUnsynced(new Map(deltas.slice(at)));
          return;
        }
        batch.forEach(([flow], i) => this.service.adopt(flow, Number(reply[i])));
      }
    } finally {
      this.syncing = false;
    }
  }

  connected(timeoutMs: number): Promise<boolean> {
    return this.link.connected(timeoutMs);
  }

  async close(): Promise<void> {
    this.cancel?.();
    this.cancel = undefined;
    await this.link.close();
  }

  private schedule(): void {
    this.cancel = this.timers.after(this.options.syncIntervalMs, () => {
      void this.sync().finally(() => {
        if (this.cancel !== undefined) this.schedule();
      });
    });
  }
}

/** The shared counters when admission.store is Redis (the budgets' store, keys of their own); else none. */
export function sharedAttainedService(
  config: GatewayConfig,
  service: AttainedService,
  deps: {
    clock: { nowMs(): number };
    timers: Timers;
    logger: RedisLinkOptions["logger"];
    health: RedisLinkOptions["health"];
  },
): RedisAttainedService | undefined {
  const store = config.admission.store;
  if (store.kind !== "redis") return undefined;
  const { scheduling } = config.admission;
  return new RedisAttainedService(
    service,
    {
      keyPrefix: `${store.key_prefix}flow:`,
      syncIntervalMs: scheduling.sync_interval_ms,
      halfLifeMs: scheduling.half_life_seconds * 1000,
      link: {
        ...redisConnection(store),
        timeoutMs: store.timeout_ms,
        logger: deps.logger,
        health: deps.health,
      },
    },
    deps.clock,
    deps.timers,
  );
}
