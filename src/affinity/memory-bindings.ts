// The binding store of one process: the StickyTable behind the store contract (answers at once, never a promise
// on the request path).
import type {
  BindingEffect,
  BindingLookup,
  BindingStore,
  BrokenListener,
  LookupPurpose,
} from "./binding-store.js";
import type { Hash64 } from "./hash.js";
import type { StickyTable } from "./sticky-table.js";

/** Applies a decision's effects to a table, in order; a break that broke a live binding is reported to `broken`. */
function applyToTable(
  table: StickyTable,
  effects: readonly BindingEffect[],
  nowMs: number,
  broken: BrokenListener,
): void {
  for (const effect of effects) {
    switch (effect.kind) {
      case "bind":
        table.bind(effect.sessionId, effect.placement, effect.backendId, effect.expiresAtMs, nowMs);
        break;
      case "refresh":
        table.refresh(effect.sessionId, effect.expiresAtMs);
        break;
      case "break":
        if (table.breakBinding(effect.sessionId, effect.backendId, nowMs)) broken(effect.tier, 1);
        break;
    }
  }
}

const IGNORE_BROKEN: BrokenListener = () => undefined;

/** Resolved once, for the lifecycle's answers. */
const DONE: Promise<void> = Promise.resolve();

const CONNECTED: Promise<boolean> = Promise.resolve(true);

/**
 * The memory store. The Redis store wraps one: its table is then the replica's local view, which sweeps,
 * moves and counts stay on.
 */
export class MemoryBindingStore implements BindingStore {
  /** Where broken bindings are reported (the placement service's recorder). */
  private broken: BrokenListener = IGNORE_BROKEN;

  constructor(readonly table: StickyTable) {}

  lookup(sessionId: string, nowMs: number, _purpose: LookupPurpose): BindingLookup {
    return this.table.get(sessionId, nowMs);
  }

  apply(effects: readonly BindingEffect[], nowMs: number): void {
    applyToTable(this.table, effects, nowMs, this.broken);
  }

  breakBackend(backendId: string, tier: string, nowMs: number): Promise<number> {
    const count = this.table.breakBackend(backendId, nowMs);
    if (count > 0) this.broken(tier, count);
    return Promise.resolve(count);
  }

  sweep(nowMs: number, maxEntries: number): Promise<number> {
    return Promise.resolve(this.table.sweep(nowMs, maxEntries));
  }

  moveSessions(
    fromBackendId: string,
    toBackendId: string,
    nowMs: number,
    shouldMove: (placement: Hash64) => boolean,
  ): Promise<number> {
    return Promise.resolve(this.table.moveSessions(fromBackendId, toBackendId, nowMs, shouldMove));
  }

  countFor(backendId: string): number {
    return this.table.countFor(backendId);
  }

  clear(): void {
    this.table.clear();
  }

  onBroken(listener: BrokenListener): void {
    this.broken = listener;
  }

  connected(_timeoutMs: number): Promise<boolean> {
    return CONNECTED;
  }

  /** The table's entries carry their own expiry: nothing to change. */
  configure(_stickyTtlMs: number): void {}

  flush(): Promise<void> {
    return DONE;
  }

  close(): Promise<void> {
    return DONE;
  }
}
