// GET /admin/sessions: a page of sessions, from this replica's route receipts (memory) or the Redis binding store.
import { GatewayError } from "../core/errors.js";
import {
  MAX_SESSIONS_PAGE,
  decodeCursor,
  scannedSessionPage,
  type SessionPage,
} from "../receipts/session-list.js";
import type { GatewayParts } from "./runtime.js";

export type SessionListDeps = Pick<GatewayParts, "registry" | "receipts" | "bindings" | "clock">;

/** Validates `limit` (1 to MAX_SESSIONS_PAGE) and lists one page from `after` (a previous page's next_after). */
export async function listSessions(
  rt: SessionListDeps,
  after: string | undefined,
  limitText: string,
): Promise<SessionPage> {
  const limit = Number(limitText);
  if (!/^\d+$/.test(limitText) || limit < 1 || limit > MAX_SESSIONS_PAGE)
    throw new GatewayError("invalid_request", `limit must be an integer from 1 to ${MAX_SESSIONS_PAGE}`, {
      param: "limit",
    });
  const remembered = rt.receipts.sessions(after, limit);
  if (remembered !== undefined) return remembered;
  if (rt.bindings.scanSessions === undefined)
    throw new GatewayError("not_implemented", "this binding store cannot list its sessions");
  const page = await rt.bindings.scanSessions(
    after === undefined ? undefined : decodeCursor(after),
    limit,
    rt.clock.nowMs(),
  );
  // Each session's receipts (the same Redis), read side by side: one round trip for the page.
  const receipts = await Promise.all(page.bindings.map((b) => rt.receipts.recent(b.sessionId)));
  return scannedSessionPage(page.bindings, receipts, (id) => rt.registry.get(id)?.tier, page.next);
}
