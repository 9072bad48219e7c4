// Which engine stores each Responses API response, shared by the replicas through Redis (beside the bindings).
//
// Key, under affinity.store's key_prefix P: `P o:<response id>` = JSON {b: backend id, s: session key}, kept
// responses.ttl_seconds after its last use. The replica's own table (ResponseOwners) is its local view:
// what it served or has read answers without a round trip; an id it does not know costs one GET. An owner
// is written through (remember() resolves once Redis acknowledged it): the answer that carries the id is
// completed only after that (src/gateway/owner-write-gate.ts), so a client's next turn finds it through any
// replica. Fails open like the bindings: with Redis away a replica knows what it served, and the writes
// made meanwhile are replayed when Redis is back, followed by every owner the replica knows (a restarted
// Redis is empty).
import type { GatewayConfig } from "../config/schema.js";
import type { Clock } from "../core/clock.js";
import { redisConnection } from "../store/redis-connection.js";
import {
  LuaScript,
  RedisLink,
  UNAVAILABLE,
  type RedisLinkOptions,
  type StoreHealthSink,
} from "../store/redis-link.js";
import { WriteBehind, type ScriptCall } from "../store/write-behind.js";
import type { ResponseOwnerStore } from "./response-owner-store.js";
import { ResponseOwners, type ResponseOwner, type ResponseOwnerSettings } from "./response-owners.js";

/** KEYS: P o:<id>. ARGV: ttlMs. The owner (a use: its TTL slides), or nil. */
const READ = new LuaScript(
  `local value = redis.call('GET', KEYS[1])
if value then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return value`,
  1,
);
/** KEYS: P o:<id>. ARGV: owner JSON, ttlMs. */
const WRITE = new LuaScript(`redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1`, 1);
/** KEYS: P o:<id>. ARGV: ttlMs. A use known locally slides the shared TTL too. */
const TOUCH = new LuaScript(`return redis.call('PEXPIRE', KEYS[1], ARGV[1])`, 1);
/** KEYS: P o:<id>. */
const FORGET = new LuaScript(`return redis.call('DEL', KEYS[1])`, 1);

export const RESPONSE_OWNER_SCRIPTS: readonly LuaScript[] = [READ, WRITE, TOUCH, FORGET];

type OwnerWrite =
  | { kind: "write"; responseId: string; owner: ResponseOwner }
  | { kind: "touch"; responseId: string }
  | { kind: "forget"; responseId: string };

/** Writes waiting for Redis to come back, at most (the oldest dropped first; the local view has them). */
const MAX_PENDING = 100_000;
/** Owners written again after a reconnect, at most: chains in use are the recent ones. */
const MAX_REWRITE = 10_000;

export class RedisResponseOwners implements ResponseOwnerStore {
  readonly shared = true;
  private ttlMs: number;
  private readonly writes: WriteBehind<OwnerWrite>;

  constructor(
    private readonly local: ResponseOwners,
    private readonly link: RedisLink,
    private readonly keyPrefix: string,
    settings: ResponseOwnerSettings,
  ) {
    this.ttlMs = settings.ttlMs;
    this.writes = new WriteBehind<OwnerWrite>({ link, maxPending: MAX_PENDING, call: (w) => this.callOf(w) });
    // A restarted Redis is empty: the owners this replica knows (the most recently used) are written again
    // on each new connection, so chains continue through the other replicas after a Redis restart. Only on
    // a new connection: a link that was merely slow lost nothing, and rewriting then would add load to a
    // Redis already behind.
    link.client.on("ready", () => {
      for (const [responseId, owner] of this.local.recent(MAX_REWRITE))
        this.writes.submit({ kind: "write", responseId, owner });
    });
  }

  owner(responseId: string): ResponseOwner | undefined | Promise<ResponseOwner | undefined> {
    const known = this.local.owner(responseId);
    if (known === undefined) return this.read(responseId);
    this.writes.submit({ kind: "touch", responseId });
    return known;
  }

  async remember(responseId: string, owner: ResponseOwner): Promise<void> {
    this.local.remember(responseId, owner);
    const write: OwnerWrite = { kind: "write", responseId, owner };
    if (!this.link.up) return this.writes.submit(write);
    const { script, keys, args } = this.callOf(write);
    if ((await this.link.run(script, keys, args)) === UNAVAILABLE) this.writes.submit(write);
  }

  forget(responseId: string): void {
    this.local.forget(responseId);
    this.writes.submit({ kind: "forget", responseId });
  }

  configure(settings: ResponseOwnerSettings): void {
    this.local.configure(settings);
    this.ttlMs = settings.ttlMs;
  }

  get size(): number {
    return this.local.size;
  }

  /** Writes waiting for Redis. */
  get pendingWrites(): number {
    return this.writes.size;
  }

  flush(): Promise<void> {
    return this.writes.flush();
  }

  close(): Promise<void> {
    return this.link.close();
  }

  private async read(responseId: string): Promise<ResponseOwner | undefined> {
    const reply = await this.link.run(READ, [this.keyOf(responseId)], [this.ttlArg()]);
    if (reply === UNAVAILABLE || typeof reply !== "string") return undefined;
    const owner = parseOwner(reply);
    if (owner !== undefined) this.local.remember(responseId, owner);
    return owner;
  }

  private callOf(write: OwnerWrite): ScriptCall {
    const keys = [this.keyOf(write.responseId)];
    switch (write.kind) {
      case "write":
        return {
          script: WRITE,
          keys,
          args: [JSON.stringify({ b: write.owner.backendId, s: write.owner.sessionKey }), this.ttlArg()],
        };
      case "touch":
        return { script: TOUCH, keys, args: [this.ttlArg()] };
      case "forget":
        return { script: FORGET, keys, args: [] };
    }
  }

  private ttlArg(): number {
    return Math.max(1, Math.round(this.ttlMs));
  }

  private keyOf(responseId: string): string {
    return `${this.keyPrefix}o:${responseId}`;
  }
}

/** An owner as stored; anything else (a hand edit, another version's) reads as unknown. */
function parseOwner(text: string): ResponseOwner | undefined {
  try {
    const value = JSON.parse(text) as { b?: unknown; s?: unknown };
    if (typeof value.b !== "string" || typeof value.s !== "string") return undefined;
    return { backendId: value.b, sessionKey: value.s };
  } catch {
    return undefined;
  }
}

export interface ResponseOwnerDeps {
  clock: Clock;
  logger: RedisLinkOptions["logger"];
  /** The shared store's health (the owners share the bindings' Redis, and its health metrics). */
  health: StoreHealthSink;
}

/** The owners' store the config implies: shared through affinity.store when that is Redis, else memory. */
export function createResponseOwnerStore(
  config: GatewayConfig,
  settings: ResponseOwnerSettings,
  deps: ResponseOwnerDeps,
): ResponseOwnerStore {
  const local = new ResponseOwners(deps.clock, settings);
  const store = config.affinity.store;
  if (store.kind !== "redis") return local;
  const link = new RedisLink({
    ...redisConnection(store),
    timeoutMs: store.timeout_ms,
    name: "response owners",
    scripts: RESPONSE_OWNER_SCRIPTS,
    logger: deps.logger,
    health: deps.health,
  });
  return new RedisResponseOwners(local, link, store.key_prefix, settings);
}
