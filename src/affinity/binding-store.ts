// The interface of the sticky-binding table (session -> backend), so a shared store can replace the local one.

/** The session had a binding, but it lapsed (TTL passed without activity). Reported by get(), never bound. */
export const EXPIRED: unique symbol = Symbol("binding expired");
/** The session had a binding, but its backend went down or failed it. Reported by get(), never bound. */
export const BROKEN: unique symbol = Symbol("binding broken");

/** What get() knows of a session: its live backend id, why it has none any more, or undefined (never seen). */
export type BindingLookup = string | typeof EXPIRED | typeof BROKEN | undefined;

export interface BindingStore {
  /** Sessions remembered: live bindings plus expired and broken ones not yet reclaimed (bounded by the cap). */
  readonly size: number;
  /** Bindings dropped because the table was full (least recently used first). */
  readonly evictions: number;
  /** Looks a session up without refreshing it; an expired binding is never returned as live. */
  get(sessionId: string, nowMs: number): BindingLookup;
  /** Binds, rebinds or refreshes a session until `expiresAtMs`, making it the most recently used. */
  set(sessionId: string, backendId: string, expiresAtMs: number, nowMs: number): void;
  /** Forgets a session entirely. */
  delete(sessionId: string): void;
  /** Breaks the session's binding if (and only if) it is live and points at `backendId`; true if it did. */
  breakBinding(sessionId: string, backendId: string, nowMs: number): boolean;
  /** Breaks every live binding to `backendId`; returns how many. Touches only that backend's bindings. */
  breakBackend(backendId: string, nowMs: number): number;
  /** Live-or-unreclaimed bindings that point at `backendId`. */
  countFor(backendId: string): number;
  /** Calls `visit` for each live binding of `backendId` (the visitor must not modify the store). */
  forEachSession(backendId: string, nowMs: number, visit: (sessionId: string) => void): void;
  /** Forgets every session. */
  clear(): void;
  /** Reclaims up to `maxEntries` expired bindings, oldest first, without scanning live ones; returns how many. */
  sweep(nowMs: number, maxEntries: number): number;
}
