// The interface of the sticky-binding table (session -> backend), so a shared store can replace the local one.
import type { Hash64 } from "./hash.js";

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
  /**
   * Binds or rebinds a session until `expiresAtMs`, making it the most recently used. `placement` is the
   * session's rendezvous hash, kept so that moveSessions() can re-place bindings without their ids.
   */
  bind(sessionId: string, placement: Hash64, backendId: string, expiresAtMs: number, nowMs: number): void;
  /** Extends a live binding until `expiresAtMs` and makes it the most recently used (the hit path). */
  refresh(sessionId: string, expiresAtMs: number): void;
  /** Forgets a session entirely. */
  delete(sessionId: string): void;
  /** Breaks the session's binding if (and only if) it is live and points at `backendId`; true if it did. */
  breakBinding(sessionId: string, backendId: string, nowMs: number): boolean;
  /** Breaks every live binding to `backendId`; returns how many. Touches only that backend's bindings. */
  breakBackend(backendId: string, nowMs: number): number;
  /** Live-or-unreclaimed bindings that point at `backendId`. */
  countFor(backendId: string): number;
  /**
   * Rebinds to `toBackendId` each live binding of `fromBackendId` whose placement hash `shouldMove` accepts,
   * keeping its expiry and recency (a move is not a use); returns how many moved.
   */
  moveSessions(
    fromBackendId: string,
    toBackendId: string,
    nowMs: number,
    shouldMove: (placement: Hash64) => boolean,
  ): number;
  /** Forgets every session. */
  clear(): void;
  /** Reclaims up to `maxEntries` expired bindings, oldest first, without scanning live ones; returns how many. */
  sweep(nowMs: number, maxEntries: number): number;
}
