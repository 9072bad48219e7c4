// Token budgets shared by every replica: an atomic sliding window per agent in Redis, failing open to a local one.
import type { BudgetStore } from "./budget-store.js";
import {
  BUDGET_BUCKETS,
  TokenBudgets,
  type BudgetDecision,
  type BudgetSettings,
  type Reservation,
  type ReserveDecision,
} from "./token-budgets.js";
import { LuaScript, RedisLink, UNAVAILABLE, type RedisLinkOptions } from "../store/redis-link.js";
import { WriteBehind } from "../store/write-behind.js";

/*
 * One hash per agent: field = absolute bucket number (floor(now / bucketMs)), value = tokens counted in it.
 * The window is BUDGET_BUCKETS buckets, exactly as the memory store cuts it, so both answer the same.
 * Buckets that left the window are deleted by the next admission; the key expires a window after its
 * last write. Time comes from the caller (each replica's clock), so tests drive it.
 */
const WINDOW_SUM = `
local now = tonumber(ARGV[1])
local bucketMs = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local current = math.floor(now / bucketMs)
local flat = redis.call('HGETALL', KEYS[1])
local used = 0
local live = {}
for i = 1, #flat, 2 do
  local b = tonumber(flat[i])
  local t = tonumber(flat[i + 1])
  if current - b < n then
    used = used + t
    live[#live + 1] = { b, t }
  else
    redis.call('HDEL', KEYS[1], flat[i])
  end
end
`;

/**
 * KEYS: agent. ARGV: nowMs, bucketMs, buckets, budget, wanted (-1: all that is left), minimum, windowMs.
 * Holds min(wanted, left) tokens in the current bucket when at least max(1, minimum) are left. Returns
 * {1, used, granted} or {0, used, retryAfterSeconds}.
 */
const RESERVE = new LuaScript(
  `${WINDOW_SUM}
local budget = tonumber(ARGV[4])
local wanted = tonumber(ARGV[5])
local minimum = math.max(1, tonumber(ARGV[6]))
local windowMs = tonumber(ARGV[7])
local left = budget - used
if left < minimum then
  local retry = 1
  if used >= budget then
    table.sort(live, function(x, y) return x[1] < y[1] end)
    local remaining = used
    retry = math.ceil(windowMs / 1000)
    for _, entry in ipairs(live) do
      remaining = remaining - entry[2]
      if remaining < budget then
        retry = math.max(1, math.ceil(((entry[1] + n) * bucketMs - now) / 1000))
        break
      end
    end
  end
  return { 0, used, retry }
end
local granted = left
if wanted >= 0 and wanted < left then granted = wanted end
if granted > 0 then
  redis.call('HINCRBY', KEYS[1], current, granted)
  redis.call('PEXPIRE', KEYS[1], math.ceil(windowMs + bucketMs))
end
return { 1, used, granted }
`,
  1,
);

/**
 * KEYS: agent. ARGV: bucketMs, windowMs, then one or more pairs (atMs, tokens signed): each pair's tokens
 * are counted in its own time's bucket. A settle sends both of its charges (the hold leaving, the usage
 * arriving) in one call.
 */
const ADD = new LuaScript(
  `
local bucketMs = tonumber(ARGV[1])
for i = 3, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[1], math.floor(tonumber(ARGV[i]) / bucketMs), ARGV[i + 1])
end
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) + bucketMs))
return 1
`,
  1,
);

/** KEYS: agent. ARGV: nowMs, bucketMs, buckets. */
const USED = new LuaScript(`${WINDOW_SUM}\nreturn used\n`, 1);

/** Settles made while Redis was unreachable, replayed when it is back; the oldest go first past this many. */
const MAX_PENDING = 10_000;

interface Charge {
  tokens: number;
  atMs: number;
}

/** One agent's charges, counted in one call (a settle's hold leaving and usage arriving). */
interface ChargeWrite {
  agentId: string;
  charges: readonly Charge[];
}

/** A hold counted in the shared window (one decided by the local fallback is a plain Reservation). */
interface SharedReservation extends Reservation {
  readonly shared: true;
  /** When it was counted: it leaves that bucket at settle time. */
  readonly atMs: number;
}

function isShared(reservation: Reservation): reservation is SharedReservation {
  return (reservation as Partial<SharedReservation>).shared === true;
}

export interface RedisBudgetStoreOptions {
  link: Omit<RedisLinkOptions, "name" | "scripts">;
  keyPrefix: string;
}

export class RedisBudgetStore implements BudgetStore {
  private readonly link: RedisLink;
  /** This replica's own share of usage: decides alone while Redis is away. */
  private local: TokenBudgets;
  private readonly writes: WriteBehind<ChargeWrite>;

  constructor(
    private settings: BudgetSettings,
    private readonly options: RedisBudgetStoreOptions,
  ) {
    this.local = new TokenBudgets(settings);
    this.link = new RedisLink({ ...options.link, name: "budgets", scripts: [RESERVE, ADD, USED] });
    // Charges made while Redis is away are replayed when it is back, each in the bucket of its own time.
    this.writes = new WriteBehind({
      link: this.link,
      maxPending: MAX_PENDING,
      call: ({ agentId, charges }) => {
        const args: number[] = [this.bucketMs, this.settings.windowMs];
        for (const charge of charges) args.push(charge.atMs, charge.tokens);
        return { script: ADD, keys: [this.key(agentId)], args };
      },
    });
  }

  private get bucketMs(): number {
    return this.settings.windowMs / BUDGET_BUCKETS;
  }

  private key(agentId: string): string {
    return this.options.keyPrefix + agentId;
  }

  budgetOf(agentId: string): number {
    return this.local.budgetOf(agentId);
  }

  /** This replica's own charges only: it never refuses what the shared window would admit. */
  check(agentId: string, nowMs: number): BudgetDecision {
    return this.local.check(agentId, nowMs);
  }

  async reserve(
    agentId: string,
    wanted: number,
    minimum: number,
    nowMs: number,
    keyed: boolean,
  ): Promise<ReserveDecision> {
    const budget = this.budgetOf(agentId);
    const wantedArg = Number.isFinite(wanted) ? Math.max(0, Math.round(wanted)) : -1;
    const reply = await this.link.run(
      RESERVE,
      [this.key(agentId)],
      [nowMs, this.bucketMs, BUDGET_BUCKETS, budget, wantedArg, Math.round(minimum), this.settings.windowMs],
    );
    if (reply === UNAVAILABLE || !Array.isArray(reply)) {
      // Redis away: this replica decides alone on what it has seen; the charges are written back later.
      return this.local.reserveNow(agentId, wanted, minimum, nowMs, keyed);
    }
    const [allowed, used, third] = reply as number[];
    if (allowed !== 1) {
      return { allowed: false, reason: "budget", retryAfterSeconds: third!, used: used!, budget };
    }
    const reservation: SharedReservation = { agentId, tokens: third!, shared: true, atMs: nowMs };
    return { allowed: true, reservation, granted: third! };
  }

  settle(reservation: Reservation, usedTokens: number, nowMs: number): void {
    const used = usedTokens > 0 ? Math.round(usedTokens) : 0;
    const charges: Charge[] = [];
    if (isShared(reservation)) {
      // The hold leaves the bucket it was counted in; the real usage is counted now (one call for both).
      if (reservation.tokens > 0) charges.push({ tokens: -reservation.tokens, atMs: reservation.atMs });
    } else {
      this.local.settle(reservation, 0, nowMs);
    }
    if (used > 0) {
      this.local.charge(reservation.agentId, used, nowMs);
      charges.push({ tokens: used, atMs: nowMs });
    }
    if (charges.length > 0) this.writes.submit({ agentId: reservation.agentId, charges });
  }

  async usage(agentId: string, nowMs: number): Promise<number> {
    const reply = await this.link.run(USED, [this.key(agentId)], [nowMs, this.bucketMs, BUDGET_BUCKETS]);
    return typeof reply === "number" ? reply : this.local.used(agentId, nowMs) + this.local.reserved(agentId);
  }

  accepts(settings: BudgetSettings): boolean {
    return this.local.accepts(settings);
  }

  configure(settings: BudgetSettings): void {
    this.settings = settings;
    this.local.configure(settings);
  }

  /** Settles' charges waiting for Redis to come back (for tests and the admin view). */
  get pendingWrites(): number {
    return this.writes.size;
  }

  flush(): Promise<void> {
    return this.writes.flush();
  }

  connected(timeoutMs: number): Promise<boolean> {
    return this.link.connected(timeoutMs);
  }

  async close(): Promise<void> {
    await this.link.close();
  }
}
