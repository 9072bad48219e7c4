// GET /admin/sessions: the sessions this replica remembers (route receipts), a page at a time, by session id.
import type { SessionReceipts } from "./receipt-memory.js";

export const DEFAULT_SESSIONS_PAGE = 100;
export const MAX_SESSIONS_PAGE = 1000;

export interface SessionSummary {
  session_id: string;
  /** The engine and tier of its last turn, and when that turn ended (epoch ms). */
  backend_id: string;
  tier: string;
  last_turn_at_ms: number;
  receipts: number;
}

export interface SessionPage {
  sessions: SessionSummary[];
  /** Pass as `after` for the next page; null on the last one. */
  next_after: string | null;
  /** Sessions remembered in all (every page). */
  total: number;
}

/**
 * One page of `entries`, ordered by session id (a stable order: recency changes with every turn), after the
 * id `after`. Sessionless requests' prefix keys (`prefix:...`) are not sessions and are left out.
 */
export function sessionPage(
  entries: Iterable<[string, SessionReceipts]>,
  after: string | undefined,
  limit: number,
): SessionPage {
  const sessions = [...entries].filter(([key]) => !key.startsWith("prefix:"));
  sessions.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const start = after === undefined ? 0 : sessions.findIndex(([key]) => key > after);
  const page = start < 0 ? [] : sessions.slice(start, start + limit);
  const last = page.at(-1);
  const more = start >= 0 && start + limit < sessions.length;
  return {
    sessions: page.map(([id, entry]) => ({
      session_id: id,
      backend_id: entry.last.backendId,
      tier: entry.last.tier,
      last_turn_at_ms: entry.last.atMs,
      receipts: entry.receipts.length,
    })),
    next_after: more && last !== undefined ? last[0] : null,
    total: sessions.length,
  };
}
