// Blocks an engine is about to hold: prompts this gateway sent it whose BlockStored events have not all come yet.
//
// An engine reports a block only once it has computed it, so for the whole prefill of a prompt (seconds for 100k
// tokens) the index says nothing of it. A second request with the same prefix placed in that window (a burst of
// sub-agents, a turn sent before the previous one's events arrived) would be predicted a miss, yet the engine
// runs requests first come, first served, and the second one finds the first one's blocks computed by the time it
// is scheduled. Leading routers count these blocks too: Dynamo's KV router tracks the blocks of the requests it
// routed until they complete, and llm-d's precise scorer writes speculative index entries when it routes.
//
// One entry per request placed (sent, or awaiting its binding write: `sent`), held or not, ending at the first of: the
// request ends (released), `ttlMs` passes (a safety net for an end that is never reported), or the bound drops it
// (oldest first). Not when the index holds all its blocks: until the engine schedules the request it may still evict
// them (the index runs behind the engine by the events in flight, and a full engine evicts for the prefill queued
// ahead), and the request then computes them again, work ahead of every later request there (progressed()). Once
// scheduled, its blocks are in use and cannot be evicted, so the entry's blocks stay held until its end. Entries keep a
// reference to the request's own content keys, never a copy. Pure: time comes in as `nowMs`, the index as a membership
// test.
import type { PromptBlocks } from "./prompt-blocks.js";

/** How long an entry may live unreleased: far above a prefill's length, so only a lost release ends it. */
export const DEFAULT_PENDING_TTL_MS = 120_000;

/** Another replica's send as this view heard it: its place among the others' sends (the fleet's order), and when. */
export interface OtherSend {
  readonly order: number;
  readonly atMs: number;
}

interface PendingEntry {
  /** Content keys of the prompt's blocks from `offset` on (all of them for a prompt this gateway sent). */
  readonly keys: ArrayLike<number>;
  /**
   * Leading blocks not carried in `keys` (a prompt another replica sent: only the blocks it did not find held
   * there travel, src/kv-events/shared-pending.ts); 0 for this gateway's own.
   */
  readonly offset: number;
  /** The content key of block `offset - 1` (what a prompt must hold there to share the carried blocks). */
  readonly anchor: number | undefined;
  readonly promptTokens: number;
  readonly blockSizeTokens: number;
  /** Leading blocks known computed: held or pending when it was sent, then as its events arrive. */
  storedBlocks: number;
  /**
   * On its way to the engine. A placement whose binding is being written is pending (a burst's next request must
   * find its blocks) but not yet sent: a request sent before it reaches the engine first and finds none of them.
   */
  sent: boolean;
  /** Another replica's send: where it came in the fleet's order, and when. Undefined for this gateway's own. */
  readonly other: OtherSend | undefined;
  readonly expiresAtMs: number;
}

export class PendingBlocks {
  /** Entry id -> entry; insertion order is send order, so the oldest (first to expire or be dropped) lead. */
  private readonly entries = new Map<number, PendingEntry>();
  private nextId = 1;
  /** Blocks referenced by the entries (the bound's measure). */
  private blocks = 0;

  constructor(
    /** Most blocks kept over all entries (about the engine's KV capacity: it cannot compute more at once). */
    readonly maxBlocks: number,
    readonly ttlMs: number = DEFAULT_PENDING_TTL_MS,
  ) {}

  /** Live and expired entries not yet purged. */
  get size(): number {
    return this.entries.size;
  }

  /**
   * Records a prompt sent to the engine, of which `heldBlocks` leading blocks were held or pending there already
   * and will still be when the engine schedules it (the eviction forecast's run, when it forecast any: the blocks
   * past it the engine evicts first and the request computes again, work ahead of later requests like the rest).
   * Returns the id to release() it by, or undefined when it has no blocks or more than the bound. `sent` false:
   * placed, not yet on its way (markSent). `other`: another replica's send, known whole.
   */
  add(
    blocks: PromptBlocks,
    heldBlocks: number,
    nowMs: number,
    sent = true,
    other?: OtherSend,
  ): number | undefined {
    this.purgeExpired(nowMs);
    const count = blocks.keys.length;
    if (count === 0 || count > this.maxBlocks) return undefined;
    return this.insert(
      {
        keys: blocks.keys,
        offset: 0,
        anchor: undefined,
        promptTokens: blocks.promptTokens,
        blockSizeTokens: blocks.blockSizeTokens,
        storedBlocks: Math.min(count, Math.max(0, heldBlocks)),
        sent,
        other,
        expiresAtMs: nowMs + this.ttlMs,
      },
      count,
    );
  }

  /**
   * Records a prompt another replica sent the engine, of which only the blocks from `offset` on are known
   * (`tailKeys`; block `offset - 1` has content key `anchor`): it had found the first `offset` held or pending
   * there. Returns the id to release() it by, or undefined when there is nothing to wait for.
   */
  addShared(
    sent: {
      readonly offset: number;
      readonly anchor: number | undefined;
      readonly tailKeys: ArrayLike<number>;
      readonly promptTokens: number;
      readonly blockSizeTokens: number;
    },
    nowMs: number,
    other: OtherSend,
  ): number | undefined {
    this.purgeExpired(nowMs);
    const count = sent.tailKeys.length;
    if (count === 0 || count > this.maxBlocks || sent.offset > 0 !== (sent.anchor !== undefined))
      return undefined;
    return this.insert(
      {
        keys: sent.tailKeys,
        offset: sent.offset,
        anchor: sent.anchor,
        promptTokens: sent.promptTokens,
        blockSizeTokens: sent.blockSizeTokens,
        storedBlocks: sent.offset,
        sent: true,
        other,
        expiresAtMs: nowMs + this.ttlMs,
      },
      count,
    );
  }

  private insert(entry: PendingEntry, count: number): number {
    const id = this.nextId++;
    this.entries.set(id, entry);
    this.blocks += count;
    while (this.blocks > this.maxBlocks) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.release(oldest);
    }
    return id;
  }

  /**
   * A placed entry is on its way to the engine, `heldBlocks` of it held or pending there as it is sent (the
   * prediction made at the send, which may be less than at the placement: a prompt placed and not sent counted then).
   */
  markSent(id: number, heldBlocks: number): void {
    const entry = this.entries.get(id);
    if (entry === undefined || entry.sent) return;
    entry.sent = true;
    entry.storedBlocks = Math.min(entry.keys.length, Math.max(0, heldBlocks));
  }

  /** The request ended (answered, failed or cancelled): what it computed is in the index or never will be. */
  release(id: number): void {
    const entry = this.entries.get(id);
    if (entry === undefined) return;
    this.entries.delete(id);
    this.blocks -= entry.keys.length;
  }

  /**
   * The index applied events: each entry's computed run grows over the blocks the index now holds.
   *
   * `evicted`: content keys of these entries' prompts that the engine evicted in these events (the caller passes
   * only keys some entry holds, so the common batch costs nothing here). An engine cannot evict a block a running
   * request uses, so such a block belonged to a request not yet scheduled: the engine will compute it again, and
   * the entry's computed run is cut back to it. Without the cut the prefill work ahead (remainingTokens) stayed
   * what the gateway expected at the send, and each eviction it did not foresee made it foresee too few for the
   * next request on that engine (docs/kv-events.md, "Seventh round").
   */
  progressed(holds: (contentKey: number) => boolean, nowMs: number, evicted?: ReadonlySet<number>): void {
    this.purgeExpired(nowMs);
    const cut = evicted !== undefined && evicted.size > 0;
    for (const entry of this.entries.values()) {
      const { keys, offset } = entry;
      const end = offset + keys.length;
      let stored = entry.storedBlocks;
      if (cut) {
        // Only the carried keys can be checked (a shared entry's blocks before its offset are not known here).
        for (let at = offset; at < stored; at++) {
          const key = keys[at - offset] as number;
          if (evicted.has(key) && !holds(key)) {
            stored = at;
            break;
          }
        }
      }
      while (stored < end && holds(keys[stored - offset] as number)) stored++;
      entry.storedBlocks = stored;
    }
  }

  /**
   * The first `length` content keys of a live pending prompt whose block `length - 1` has key `lastKey` (keys
   * are chained: such a prompt agrees on every earlier block), or undefined when none has. Another replica's
   * send that found its prefix pending, not yet stored (a burst's shared sub-agent prompt being computed), is
   * tracked whole from it (kv-cache-view.ts, applyShared).
   */
  prefixTo(lastKey: number, length: number, nowMs: number): ArrayLike<number> | undefined {
    if (length <= 0) return undefined;
    for (const entry of this.entries.values()) {
      if (entry.expiresAtMs <= nowMs || entry.offset !== 0 || entry.keys.length < length) continue;
      if (entry.keys[length - 1] !== lastKey) continue;
      return entry.keys;
    }
    return undefined;
  }

  /**
   * The longest leading run of `keys` (a prompt's content keys) that a live pending prompt shares; with `sentOnly`,
   * a prompt already sent (what a request sent now will find computed or being computed ahead of it), and of the
   * other replicas' sends only those up to `othersUpTo` in the fleet's order (the ones ahead of it).
   */
  sharedBlocks(keys: ArrayLike<number>, nowMs: number, sentOnly = false, othersUpTo = Infinity): number {
    let most = 0;
    for (const entry of this.entries.values()) {
      if (entry.expiresAtMs <= nowMs || (sentOnly && !entry.sent)) continue;
      if (entry.other !== undefined && entry.other.order > othersUpTo) continue;
      const shared = sharedRunOf(entry, keys);
      if (shared > most) most = shared;
    }
    return most;
  }

  /**
   * Whether `keys` shares more with another replica's send applied after `sinceMs` than with any other prompt
   * sent: the longest run the older sends give (`olderRun`), the longest the fresh ones give (`freshRun`), and when
   * the latest fresh send that gives more than the older ones was applied. Undefined when no fresh send does. Of
   * the other replicas' sends, only those up to `othersUpTo` in the fleet's order count.
   */
  freshOthers(
    keys: ArrayLike<number>,
    nowMs: number,
    sinceMs: number,
    othersUpTo = Infinity,
  ): { olderRun: number; freshRun: number; latestAtMs: number } | undefined {
    let olderRun = 0;
    let fresh: { run: number; atMs: number }[] | undefined;
    for (const entry of this.entries.values()) {
      if (entry.expiresAtMs <= nowMs || !entry.sent) continue;
      const { other } = entry;
      if (other !== undefined && other.order > othersUpTo) continue;
      const run = sharedRunOf(entry, keys);
      if (other !== undefined && other.atMs > sinceMs) (fresh ??= []).push({ run, atMs: other.atMs });
      else if (run > olderRun) olderRun = run;
    }
    if (fresh === undefined) return undefined;
    let freshRun = 0;
    let latestAtMs = -Infinity;
    for (const { run, atMs } of fresh) {
      if (run <= olderRun) continue;
      if (run > freshRun) freshRun = run;
      if (atMs > latestAtMs) latestAtMs = atMs;
    }
    return freshRun === 0 ? undefined : { olderRun, freshRun, latestAtMs };
  }

  /**
   * Prompt tokens the engine has still to compute for the live pending prompts: the prefill work ahead of a
   * request sent there now (tokens past each prompt's computed run; its events tell how far it got). With a
   * `contextWeight`, that work in tokens at no context (prefillWorkTokens): a token computed after a long context
   * costs more than one after a short one.
   */
  remainingTokens(nowMs: number, contextWeight = 0): number {
    let tokens = 0;
    for (const entry of this.entries.values()) {
      if (entry.expiresAtMs <= nowMs) continue;
      const computed = entry.storedBlocks * entry.blockSizeTokens;
      tokens += prefillWorkTokens(Math.max(0, entry.promptTokens - computed), computed, contextWeight);
    }
    return tokens;
  }

  private purgeExpired(nowMs: number): void {
    // Every entry lives ttlMs from its send, so the expired ones are the oldest: they lead the map.
    for (const [id, entry] of this.entries) {
      if (entry.expiresAtMs > nowMs) return;
      this.release(id);
    }
  }
}

/**
 * How many leading blocks of `keys` an entry shares. An entry carried from `offset` shares its blocks only with a
 * prompt whose block `offset - 1` is its anchor (chained keys: then every earlier block agrees too); a prompt
 * that differs before it shares none of the carried blocks (what it shares before the offset was held there
 * when the entry was sent, and the index answers for it).
 */
function sharedRunOf(entry: PendingEntry, keys: ArrayLike<number>): number {
  const { offset } = entry;
  if (offset === 0) return sharedRun(entry.keys, keys);
  if (keys.length < offset || keys[offset - 1] !== entry.anchor) return 0;
  return offset + sharedRun(entry.keys, keys, offset);
}

/**
 * How many leading keys two chains share (`b` read from `bFrom` on). Content keys are chained (each hashes its parent's), so two chains
 * that agree at a position agree at every earlier one: the shared run is found by binary search.
 */
export function sharedRun(a: ArrayLike<number>, b: ArrayLike<number>, bFrom = 0): number {
  let low = 0;
  let high = Math.max(0, Math.min(a.length, b.length - bFrom));
  while (low < high) {
    const mid = (low + high + 1) >> 1;
    if (a[mid - 1] === b[bFrom + mid - 1]) low = mid;
    else high = mid - 1;
  }
  return low;
}

/**
 * Prefill of `newTokens` after `contextTokens` already computed, in tokens at no context: each new token attends
 * over the context and the new tokens before it, `contextWeight` of a token's linear work per token attended.
 */
export function prefillWorkTokens(newTokens: number, contextTokens: number, contextWeight: number): number {
  return newTokens * (1 + contextWeight * (contextTokens + newTokens / 2));
}
