// A page of the bindings a shared store holds (GET /admin/sessions with Redis): SCAN steps until the page is full.
import { GatewayError } from "../core/errors.js";
import { UNAVAILABLE, type Unavailable } from "../store/redis-link.js";
import type { ScannedBinding } from "./redis-bindings.js";

/**
 * Where a scan goes on: the SCAN cursor (null once Redis's iteration is complete) and the sessions a step found
 * beyond the last page's end, served first. A step returns at least the keys of whole hash buckets, so it can
 * overshoot a page; keeping the overshoot here (rather than scanning the same cursor again) loses nothing.
 */
export interface BindingCursor {
  readonly scan: string | null;
  readonly pending: readonly string[];
}

export interface BindingScanPage {
  readonly bindings: readonly ScannedBinding[];
  /** Undefined once every binding key was visited. */
  readonly next: BindingCursor | undefined;
}

/** One SCAN step (RedisBindings.scanStep): `cursor` undefined reads only `pending`. */
export type ScanStep = (
  cursor: string | undefined,
  count: number,
  pending: readonly string[],
) => Promise<{ next: string; bindings: ScannedBinding[] } | Unavailable>;

/**
 * COUNT hint of a step: what the page still lacks, at least this many (a shared Redis may hold mostly other
 * keys, and a smaller COUNT only costs more round trips).
 */
const MIN_STEP_COUNT = 16;
/**
 * Steps per page at most: a Redis holding mostly other keys yields few matches per step, and an admin request
 * must not walk its whole keyspace. The page is then short (even empty) but has a next cursor.
 */
export const MAX_SCAN_STEPS = 32;

/**
 * Up to `limit` bindings from `from` (undefined: the start), in the store's order. As with SCAN itself, a
 * binding present from the first page to the last is listed at least once (twice if Redis resized its table
 * meanwhile); one made or gone while paging may or may not be.
 */
export async function scanBindingPage(
  step: ScanStep,
  from: BindingCursor | undefined,
  limit: number,
): Promise<BindingScanPage> {
  let scan: string | null = from === undefined ? "0" : from.scan;
  let pending = from?.pending ?? [];
  const bindings: ScannedBinding[] = [];
  for (let steps = 0; steps < MAX_SCAN_STEPS; steps++) {
    const space = limit - bindings.length;
    // The pending ones alone, while they fill the page: no SCAN step adds to an overflow.
    const cursor = pending.length >= space ? undefined : (scan ?? undefined);
    const reply = await step(cursor, Math.max(space, MIN_STEP_COUNT), pending.slice(0, space));
    if (reply === UNAVAILABLE)
      throw new GatewayError("store_unavailable", "the Redis binding store did not answer; try again", {
        retryAfterSeconds: 1,
      });
    pending = pending.slice(space);
    if (cursor !== undefined) scan = reply.next === "0" ? null : reply.next;
    const found = reply.bindings;
    bindings.push(...found.slice(0, space));
    pending = [...pending, ...found.slice(space).map((b) => b.sessionId)];
    if (scan === null && pending.length === 0) return { bindings, next: undefined };
    if (bindings.length >= limit) break;
  }
  return { bindings, next: { scan, pending } };
}
