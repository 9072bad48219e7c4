// GET /admin/sessions: the sessions this replica remembers (route receipts), a page at a time, by session id; or,
// with the Redis store, the sessions bound there (every replica's), a page at a time in the store's order.
import type { BindingCursor } from "../affinity/binding-scan.js";
import type { ScannedBinding } from "../affinity/redis-bindings.js";
import { GatewayError } from "../core/errors.js";
import type { SessionReceipts } from "./receipt-memory.js";

export const DEFAULT_SESSIONS_PAGE = 100;
export const MAX_SESSIONS_PAGE = 1000;

export interface SessionSummary {
  session_id: string;
  /**
   * The engine and tier of its last turn, and when that turn ended (epoch ms). A Redis-listed session without
   * receipts (receipts off, or lapsed) shows its binding's engine (null once a request failure broke it) and
   * when the binding was last written.
   */
  backend_id: string | null;
  tier: string | null;
  last_turn_at_ms: number;
  receipts: number;
}

export interface SessionPage {
  sessions: SessionSummary[];
  /** Pass as `after` for the next page; null on the last one. Opaque (with Redis, a scan cursor). */
  next_after: string | null;
  /** Sessions remembered in all (every page); null with Redis (counting them would scan every key). */
  total: number | null;
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

/**
 * One page of sessions a Redis scan found, described as sessionPage() describes in-memory ones: by the session's
 * receipts where they are (`receipts[i]` belongs to `bindings[i]`), else by its binding.
 */
export function scannedSessionPage(
  bindings: readonly ScannedBinding[],
  receipts: readonly (SessionReceipts | undefined)[],
  tierOf: (backendId: string) => string | undefined,
  next: BindingCursor | undefined,
): SessionPage {
  return {
    sessions: bindings.map((binding, i) => {
      const entry = receipts[i];
      if (entry !== undefined)
        return {
          session_id: binding.sessionId,
          backend_id: entry.last.backendId,
          tier: entry.last.tier,
          last_turn_at_ms: entry.last.atMs,
          receipts: entry.receipts.length,
        };
      const backendId = binding.backendId === "" ? null : binding.backendId;
      return {
        session_id: binding.sessionId,
        backend_id: backendId,
        tier: backendId === null ? null : (tierOf(backendId) ?? null),
        last_turn_at_ms: binding.atMs,
        receipts: 0,
      };
    }),
    next_after: next === undefined ? null : encodeCursor(next),
    total: null,
  };
}

/** A scan cursor as the client carries it: base64url JSON (its form is not part of the API). */
export function encodeCursor(cursor: BindingCursor): string {
  return Buffer.from(JSON.stringify({ c: cursor.scan, p: cursor.pending })).toString("base64url");
}

/** The cursor a `next_after` carried; a 400 for anything this gateway did not hand out. */
export function decodeCursor(text: string): BindingCursor {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
  } catch {
    value = undefined;
  }
  const { c, p } = (typeof value === "object" && value !== null ? value : {}) as { c?: unknown; p?: unknown };
  const scanOk = c === null || (typeof c === "string" && /^\d{1,20}$/.test(c));
  const pendingOk = Array.isArray(p) && p.every((id) => typeof id === "string");
  if (!scanOk || !pendingOk)
    throw new GatewayError(
      "invalid_request",
      "after must be a next_after this gateway returned (with the Redis store it is a scan cursor, not a session id)",
      { param: "after" },
    );
  return { scan: c, pending: p as string[] };
}
