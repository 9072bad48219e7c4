// Memory of each session's last turn and its last few receipts: the interface, and the in-process store.
import type { LRUCache } from "lru-cache";
import { growingLru } from "../core/growing-lru.js";
import type { Receipt, TurnRecord } from "./receipt-rules.js";

/** Receipts kept per session for the admin API (the newest last). */
export const RECENT_RECEIPTS = 4;

export interface SessionReceipts {
  readonly last: TurnRecord;
  /** The session's latest receipts, oldest first, at most RECENT_RECEIPTS. */
  readonly receipts: readonly Receipt[];
}

/**
 * Where the gateway remembers turns, keyed by session id (or `prefix:<key>` for sessionless requests). Reads
 * and writes never reject: a store that cannot answer answers undefined (the turn is receipted as a new
 * session) and drops the write.
 */
export interface ReceiptMemory {
  /**
   * The session's entry: in process, the value itself (every turn reads one, and a promise and its callbacks
   * cost more than the lookup); a shared store's read is a promise.
   */
  read(key: string): SessionReceipts | undefined | Promise<SessionReceipts | undefined>;
  write(key: string, entry: SessionReceipts): void;
  /** Resolves once every write issued so far was stored (or dropped). */
  flush(): Promise<void>;
  close(): Promise<void>;
  /** Every entry this process holds, for GET /admin/sessions; absent where the entries live elsewhere (Redis). */
  entries?(): Iterable<[string, SessionReceipts]>;
}

/** The entry after this turn: its record, and its receipt appended to the recent ones. */
export function nextEntry(
  previous: SessionReceipts | undefined,
  last: TurnRecord,
  receipt: Receipt,
): SessionReceipts {
  const earlier = previous?.receipts ?? [];
  const receipts =
    earlier.length < RECENT_RECEIPTS
      ? [...earlier, receipt]
      : [...earlier.slice(earlier.length - RECENT_RECEIPTS + 1), receipt];
  return { last, receipts };
}

/** In-process: bounded like the sticky table (least recently used forgotten first), entries expire after ttlMs. */
export class InMemoryReceipts implements ReceiptMemory {
  private readonly lru: LRUCache<string, SessionReceipts>;

  constructor(maxEntries: number, ttlMs: number, nowMs: () => number) {
    this.lru = growingLru(maxEntries, { ttl: ttlMs, ttlResolution: 0, perf: { now: nowMs } });
  }

  read(key: string): SessionReceipts | undefined {
    return this.lru.get(key);
  }

  write(key: string, entry: SessionReceipts): void {
    this.lru.set(key, entry);
  }

  flush(): Promise<void> {
    return Promise.resolve();
  }

  *entries(): Iterable<[string, SessionReceipts]> {
    // lru-cache's entries() yields live entries only (expired ones are skipped).
    for (const [key, value] of this.lru.entries()) yield [key, value];
  }

  close(): Promise<void> {
    this.lru.clear();
    return Promise.resolve();
  }
}
