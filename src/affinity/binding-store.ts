// The binding store's contract (session -> backend): one async interface, kept by memory or by Redis.
import type { BindingCursor, BindingScanPage } from "./binding-scan.js";
import type { Hash64 } from "./hash.js";

/** The session had a binding, but it lapsed (TTL passed without activity). Reported by lookup(), never bound. */
export const EXPIRED: unique symbol = Symbol("binding expired");
/** The session had a binding, but its backend went down or failed it. Reported by lookup(), never bound. */
export const BROKEN: unique symbol = Symbol("binding broken");

/** What a lookup knows of a session: its live backend id, why it has none any more, or undefined (never seen). */
export type BindingLookup = string | typeof EXPIRED | typeof BROKEN | undefined;

/**
 * A change a placement decision makes to the bindings (src/affinity/decide.ts). Decisions only name them;
 * the placement service hands them to the store, which applies them in order.
 */
export type BindingEffect =
  /**
   * Binds or rebinds the session until `expiresAtMs`. `placement` is its rendezvous hash, kept so that
   * moveSessions() can re-place bindings without their ids.
   */
  | {
      readonly kind: "bind";
      readonly sessionId: string;
      readonly placement: Hash64;
      readonly backendId: string;
      readonly expiresAtMs: number;
    }
  /** Extends the session's live binding until `expiresAtMs` (the hit path). */
  | { readonly kind: "refresh"; readonly sessionId: string; readonly expiresAtMs: number }
  /**
   * Breaks the session's binding if (and only if) it is live and points at `backendId`. `tier` labels the
   * broken count the store reports when it did.
   */
  | { readonly kind: "break"; readonly sessionId: string; readonly backendId: string; readonly tier: string };

/** Whether a lookup is the routing of a turn (a live binding's TTL may slide with it) or only a look. */
export type LookupPurpose = "route" | "peek";

/** Told how many bindings of a tier a store broke (counted once over replicas: by the one that broke them). */
export type BrokenListener = (tier: string, count: number) => void;

export interface BindingStore {
  /**
   * What the store knows of a session at `nowMs`; never rejects (a shared store fails open to its local view).
   * A store that knows at once answers with the value, not a promise (the memory store: a request then waits
   * for no microtask).
   */
  lookup(sessionId: string, nowMs: number, purpose: LookupPurpose): BindingLookup | Promise<BindingLookup>;
  /**
   * Applies a decision's effects in order. Resolves once this replica's view has them (writes may follow);
   * returns nothing when it has them at once (the memory store).
   */
  apply(effects: readonly BindingEffect[], nowMs: number): void | Promise<void>;
  /** Breaks every live binding to `backendId`; resolves how many this replica's view held. */
  breakBackend(backendId: string, tier: string, nowMs: number): Promise<number>;
  /** Reclaims up to `maxEntries` expired bindings, oldest first, without scanning live ones; resolves how many. */
  sweep(nowMs: number, maxEntries: number): Promise<number>;
  /**
   * Rebinds to `toBackendId` each live binding of `fromBackendId` whose placement hash `shouldMove` accepts,
   * keeping its expiry (a move is not a use); resolves how many moved. Local to this replica: the config
   * refuses rebalance_on_backend_recovery with a shared store.
   */
  moveSessions(
    fromBackendId: string,
    toBackendId: string,
    nowMs: number,
    shouldMove: (placement: Hash64) => boolean,
  ): Promise<number>;
  /** Bindings to `backendId` in this replica's view (admin view and the bindings gauge). */
  countFor(backendId: string): number;
  /**
   * A page of the sessions a shared store holds (GET /admin/sessions), in the store's order; absent where this
   * process's route receipts list them (memory). Rejects with store_unavailable when the store does not answer.
   */
  scanSessions?(from: BindingCursor | undefined, limit: number, nowMs: number): Promise<BindingScanPage>;
  /** Forgets every session this replica holds (affinity turned off by a reload). */
  clear(): void;
  /** Where broken bindings are counted (the placement service's recorder); one listener. */
  onBroken(listener: BrokenListener): void;

  // Its lifecycle (as BudgetStore's): a memory store answers each at once.
  /** Resolves true once the store answers (at once for memory), false after `timeoutMs`. */
  connected(timeoutMs: number): Promise<boolean>;
  /** A reloaded sticky TTL: how far a shared store's lookups slide, how long lapsed bindings stay readable. */
  configure(stickyTtlMs: number): void;
  /** Resolves when every write sent so far has been answered (or failed open). */
  flush(): Promise<void>;
  /** Releases the store's connections; nothing is called on it afterwards. */
  close(): Promise<void>;
}
