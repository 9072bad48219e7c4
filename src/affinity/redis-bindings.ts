// Session bindings in Redis (or Valkey), shared by every replica: atomic Lua scripts and their replies.
import { LuaScript, UNAVAILABLE, type RedisLink, type Unavailable } from "../store/redis-link.js";
import type { ScriptCall } from "../store/write-behind.js";

/*
 * Keys, under the configured prefix P:
 *   P b:<session>        "backend|epoch|expiresAtMs|atMs"; backend "" once broken. The key itself lives until
 *                        expiresAtMs + graceMs, so a lapsed binding can still be told from one never made.
 *   P e:<backend>        hash {n: the backend's epoch, t: when it last broke (ms)}; absent = epoch 0.
 *   P s:<backend>:<n>    sorted set of the sessions bound to the backend at epoch n, scored by expiry.
 *   P inv                the pub/sub channel on which every change of routing is announced: "s<session>"
 *                        when a write moves a session (not when it only refreshes it) or a break breaks it,
 *                        "b<backend>" when a backend's bindings all break. Replicas that cache confirmed
 *                        bindings (RedisBindingStore) drop them on these.
 * "Break every binding of backend X" is one script: count the live members of X's current set, drop the
 * set (UNLINK frees it off the main thread), bump X's epoch. A binding written at an older epoch reads as
 * broken from then on, so nothing is walked: O(1) however many bindings X held (besides trimming members
 * that had already lapsed, each trimmed once). Every write carries the time its decision was made (atMs);
 * a write older than what the key holds, or than the backend's last break, changes nothing, so a write
 * replayed after an outage never overwrites a newer decision of another replica.
 */

const PARSE = `
local function parse(value)
  local backend, epoch, expires, at = string.match(value, '^([^|]*)|(%d+)|(%d+)|(%d+)$')
  return backend, epoch, tonumber(expires), tonumber(at), expires
end
local function epochOf(prefix, backend)
  return redis.call('HGET', prefix .. 'e:' .. backend, 'n') or '0'
end
-- A stored binding at now: 'live', 'expired' or 'broken' (nil if unreadable), then the parsed fields.
local function stateOf(prefix, value, now)
  local backend, epoch, expires, written, rawExpires = parse(value)
  if backend == nil then return nil end
  local state = 'live'
  if backend == '' or epoch ~= epochOf(prefix, backend) then state = 'broken'
  elseif expires <= now then state = 'expired' end
  return state, backend, rawExpires, written, epoch, expires
end
`;

/**
 * KEYS: b:<session>. ARGV: nowMs, prefix, ttlMs, graceMs, session. Returns nil | {"live", backend, exp} |
 * {"expired", backend, exp} | {"broken", backend}. With ttlMs > 0 (the request path) a live binding's TTL
 * slides here, in the same round trip: the turn is about to be served by it (the decision's refresh that
 * follows is then not written again, see RedisBindingStore). A binding written after nowMs (by
 * a replica whose clock runs ahead) is left as it is. ttlMs = 0 only reads (the admin view).
 */
const LOOKUP = new LuaScript(
  `${PARSE}
local value = redis.call('GET', KEYS[1])
if not value then return false end
local prefix = ARGV[2]
local now = tonumber(ARGV[1])
local state, backend, rawExpires, written, epoch, expires = stateOf(prefix, value, now)
if state == nil then return false end
if state == 'broken' then return { 'broken', backend } end
if state == 'expired' then return { 'expired', backend, rawExpires } end
local ttl = tonumber(ARGV[3])
if ttl <= 0 or written > now or now + ttl <= expires then return { 'live', backend, rawExpires } end
local newExpires = string.format('%d', now + ttl)
local keep = ttl + tonumber(ARGV[4])
redis.call('SET', KEYS[1], backend .. '|' .. epoch .. '|' .. newExpires .. '|' .. ARGV[1], 'PX', keep)
local members = prefix .. 's:' .. backend .. ':' .. epoch
redis.call('ZADD', members, newExpires, ARGV[5])
redis.call('PEXPIRE', members, keep, 'GT')
redis.call('PEXPIRE', members, keep, 'NX')
return { 'live', backend, newExpires }
`,
  1,
);

/**
 * KEYS: b:<session>. ARGV: atMs, backend, expiresAtMs, keepMs, prefix, session. Times are the replicas'
 * (an injected clock); Redis's own expiry only collects garbage, keepMs after the write (TTL + grace).
 * Binds (or refreshes) the session to the backend unless a newer decision stands. Returns 1 if written.
 */
const WRITE = new LuaScript(
  `${PARSE}
local at = tonumber(ARGV[1])
local prefix = ARGV[5]
local old = redis.call('GET', KEYS[1])
local oldBackend, oldEpoch, oldExpires, oldAt
if old then
  oldBackend, oldEpoch, oldExpires, oldAt = parse(old)
  if oldAt ~= nil and oldAt > at then return 0 end
end
local state = redis.call('HMGET', prefix .. 'e:' .. ARGV[2], 'n', 't')
local epoch = state[1] or '0'
if state[2] and tonumber(state[2]) > at then return 0 end
if oldBackend ~= nil and oldBackend ~= '' and (oldBackend ~= ARGV[2] or oldEpoch ~= epoch) then
  redis.call('ZREM', prefix .. 's:' .. oldBackend .. ':' .. oldEpoch, ARGV[6])
end
redis.call('SET', KEYS[1], ARGV[2] .. '|' .. epoch .. '|' .. ARGV[3] .. '|' .. ARGV[1], 'PX', ARGV[4])
local members = prefix .. 's:' .. ARGV[2] .. ':' .. epoch
redis.call('ZADD', members, ARGV[3], ARGV[6])
redis.call('PEXPIRE', members, ARGV[4], 'GT')
redis.call('PEXPIRE', members, ARGV[4], 'NX')
if oldBackend ~= ARGV[2] or oldEpoch ~= epoch then redis.call('PUBLISH', prefix .. 'inv', 's' .. ARGV[6]) end
return 1
`,
  1,
);

/**
 * KEYS: b:<session>. ARGV: atMs, backend, prefix, session. Breaks the binding if it is live, to that backend,
 * at its current epoch, and not written after atMs. Returns 1 only for the one call that broke it.
 */
const BREAK = new LuaScript(
  `${PARSE}
local at = tonumber(ARGV[1])
local value = redis.call('GET', KEYS[1])
if not value then return 0 end
local backend, epoch, expires, written, rawExpires = parse(value)
if backend ~= ARGV[2] or epoch ~= epochOf(ARGV[3], backend) then return 0 end
if expires <= at or written > at then return 0 end
redis.call('SET', KEYS[1], '|' .. epoch .. '|' .. rawExpires .. '|' .. ARGV[1], 'KEEPTTL')
redis.call('ZREM', ARGV[3] .. 's:' .. backend .. ':' .. epoch, ARGV[4])
redis.call('PUBLISH', ARGV[3] .. 'inv', 's' .. ARGV[4])
return 1
`,
  1,
);

/** KEYS: e:<backend>. ARGV: atMs, prefix, backend. Breaks every live binding of the backend; returns how many. */
const BREAK_BACKEND = new LuaScript(
  `
local n = tonumber(redis.call('HGET', KEYS[1], 'n') or '0')
local members = ARGV[2] .. 's:' .. ARGV[3] .. ':' .. n
redis.call('ZREMRANGEBYSCORE', members, '-inf', ARGV[1])
local count = redis.call('ZCARD', members)
redis.call('UNLINK', members)
redis.call('HSET', KEYS[1], 'n', n + 1, 't', ARGV[1])
redis.call('PUBLISH', ARGV[2] .. 'inv', 'b' .. ARGV[3])
return count
`,
  1,
);

/**
 * No KEYS (it reads keys it finds: one Redis, not a Cluster, as the other scripts). ARGV: nowMs, prefix, cursor
 * ('' scans nothing), count, then session ids to read first (a previous step's overflow). One SCAN step over
 * the binding keys (MATCH P b:*, COUNT a hint), then each session's binding as the lookup reads it (nothing
 * refreshed). Returns {next cursor, then per session: id, state, backend, expiresAtMs, atMs}; a key gone or
 * unreadable is left out.
 */
const SCAN_SESSIONS = new LuaScript(
  `${PARSE}
local now = tonumber(ARGV[1])
local prefix = ARGV[2]
local ids = {}
for i = 5, #ARGV do ids[#ids + 1] = ARGV[i] end
local out = { '0' }
if ARGV[3] ~= '' then
  local step = redis.call('SCAN', ARGV[3], 'MATCH', prefix .. 'b:*', 'COUNT', ARGV[4])
  out[1] = step[1]
  for _, key in ipairs(step[2]) do ids[#ids + 1] = string.sub(key, #prefix + 3) end
end
for _, id in ipairs(ids) do
  local value = redis.call('GET', prefix .. 'b:' .. id)
  if value then
    local state, backend, rawExpires, written = stateOf(prefix, value, now)
    if state ~= nil then
      for _, field in ipairs({ id, state, backend, rawExpires, string.format('%d', written) }) do
        out[#out + 1] = field
      end
    end
  end
end
return out
`,
  0,
);

/** Loaded by the link on every connect. */
export const BINDING_SCRIPTS: readonly LuaScript[] = [LOOKUP, WRITE, BREAK, BREAK_BACKEND, SCAN_SESSIONS];

/** A binding as a scan found it: backendId "" once a request failure broke it; atMs when it was last written. */
export interface ScannedBinding {
  readonly sessionId: string;
  readonly state: "live" | "expired" | "broken";
  readonly backendId: string;
  readonly expiresAtMs: number;
  readonly atMs: number;
}

/** What Redis knows of a session. */
export type RemoteBinding =
  | { state: "absent" }
  | { state: "live"; backendId: string; expiresAtMs: number }
  | { state: "expired"; backendId: string; expiresAtMs: number }
  | { state: "broken"; backendId: string };

/**
 * The operations on the shared bindings: the lookup and the admin's scan are run and awaited (they never
 * reject: UNAVAILABLE when Redis is away); the three writes are script calls for a write-behind queue
 * (src/store/write-behind.ts).
 */
export class RedisBindings {
  constructor(
    readonly link: RedisLink,
    private readonly prefix: string,
    /**
     * The sticky TTL: how far a lookup slides a live binding, and how long a lapsed binding is remembered
     * (so the next turn says rebind_expired).
     */
    private ttlMs: number,
  ) {}

  /** The channel the scripts announce routing changes on (see the key layout above). */
  get invalidationChannel(): string {
    return this.prefix + "inv";
  }

  setTtlMs(ttlMs: number): void {
    this.ttlMs = ttlMs;
  }

  /** What Redis holds of a session; with `refresh`, a live binding's TTL slides from nowMs (same round trip). */
  async lookup(sessionId: string, nowMs: number, refresh: boolean): Promise<RemoteBinding | Unavailable> {
    const { script, keys, args } = this.lookupCall(sessionId, nowMs, refresh);
    const reply = await this.link.run(script, keys, args);
    if (reply === UNAVAILABLE) return UNAVAILABLE;
    if (!Array.isArray(reply)) return { state: "absent" };
    const [state, backendId, expires] = reply as string[];
    if (state === "broken") return { state: "broken", backendId: backendId! };
    const expiresAtMs = Number(expires);
    return state === "live"
      ? { state: "live", backendId: backendId!, expiresAtMs }
      : { state: "expired", backendId: backendId!, expiresAtMs };
  }

  /** The lookup's script call; its reply is nil or {state, backend[, expiresAtMs]}. */
  lookupCall(sessionId: string, nowMs: number, refresh: boolean): ScriptCall {
    const ttlMs = Math.max(1, Math.ceil(this.ttlMs));
    return {
      script: LOOKUP,
      keys: [this.prefix + "b:" + sessionId],
      args: [Math.floor(nowMs), this.prefix, refresh ? ttlMs : 0, ttlMs, sessionId],
    };
  }

  /**
   * One SCAN step over the binding keys from `cursor` (undefined: none, only `pending` is read), `count` its
   * hint; `pending` (sessions a previous step found beyond a page) is read first. The bindings as they stand
   * at nowMs (nothing refreshed), and the cursor to go on from ("0": the scan is complete).
   */
  async scanStep(
    cursor: string | undefined,
    count: number,
    pending: readonly string[],
    nowMs: number,
  ): Promise<{ next: string; bindings: ScannedBinding[] } | Unavailable> {
    const reply = await this.link.run(
      SCAN_SESSIONS,
      [],
      [Math.floor(nowMs), this.prefix, cursor ?? "", Math.max(1, Math.floor(count)), ...pending],
    );
    if (reply === UNAVAILABLE) return UNAVAILABLE;
    const fields = reply as string[];
    const bindings: ScannedBinding[] = [];
    for (let i = 1; i + 4 < fields.length; i += 5) {
      bindings.push({
        sessionId: fields[i]!,
        state: fields[i + 1] as ScannedBinding["state"],
        backendId: fields[i + 2]!,
        expiresAtMs: Number(fields[i + 3]),
        atMs: Number(fields[i + 4]),
      });
    }
    return { next: fields[0]!, bindings };
  }

  /** Binds (or refreshes) a session unless a newer decision stands; its reply is 1 if written. */
  write(sessionId: string, backendId: string, expiresAtMs: number, atMs: number): ScriptCall {
    const expires = Math.ceil(expiresAtMs);
    const at = Math.floor(atMs);
    return {
      script: WRITE,
      keys: [this.prefix + "b:" + sessionId],
      args: [
        at,
        backendId,
        expires,
        // PX is relative: the binding's remaining TTL, then the grace during which it reads as lapsed.
        Math.max(0, expires - at) + Math.max(1, Math.ceil(this.ttlMs)),
        this.prefix,
        sessionId,
      ],
    };
  }

  /** Breaks a session's binding to the backend; its reply is 1 only for the one call that broke it. */
  breakBinding(sessionId: string, backendId: string, atMs: number): ScriptCall {
    return {
      script: BREAK,
      keys: [this.prefix + "b:" + sessionId],
      args: [Math.floor(atMs), backendId, this.prefix, sessionId],
    };
  }

  /** Breaks every binding of the backend; its reply is how many were live. */
  breakBackend(backendId: string, atMs: number): ScriptCall {
    return {
      script: BREAK_BACKEND,
      keys: [this.prefix + "e:" + backendId],
      args: [Math.floor(atMs), this.prefix, backendId],
    };
  }
}
