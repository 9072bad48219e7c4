// Which engine stores each Responses API response (engines keep them in their own memory), bounded, with TTL.
import type { LRUCache } from "lru-cache";
import { growingLru } from "../core/growing-lru.js";
import type { Clock } from "../core/clock.js";

export interface ResponseOwner {
  /** The engine that produced and stores the response. */
  backendId: string;
  /** The affinity key of the conversation the response belongs to (a session id, or the chain's own key). */
  sessionKey: string;
}

export interface ResponseOwnerSettings {
  ttlMs: number;
  maxEntries: number;
}

/** The memory store of owners (this process's own); also the Redis store's local view. */
export class ResponseOwners {
  /** Not shared: each process knows the responses it served. */
  readonly shared: boolean = false;

  private cache: LRUCache<string, ResponseOwner>;

  constructor(
    private readonly clock: Clock,
    settings: ResponseOwnerSettings,
  ) {
    this.cache = this.create(settings);
  }

  /** A reload that changes the settings starts a fresh table (owners already known are carried over). */
  configure(settings: ResponseOwnerSettings): void {
    const previous = this.cache;
    if (previous.max === settings.maxEntries && previous.ttl === settings.ttlMs) return;
    this.cache = this.create(settings);
    for (const [id, owner] of [...previous.entries()].reverse()) this.cache.set(id, owner);
  }

  remember(responseId: string, owner: ResponseOwner): void {
    this.cache.set(responseId, owner);
  }

  /** The response's owner; a use refreshes its TTL (a conversation in use stays findable). */
  owner(responseId: string): ResponseOwner | undefined {
    return this.cache.get(responseId);
  }

  forget(responseId: string): void {
    this.cache.delete(responseId);
  }

  get size(): number {
    return this.cache.size;
  }

  /** Up to `max` owners, most recently used first (a shared store writes them again after a Redis restart). */
  recent(max: number): [string, ResponseOwner][] {
    const out: [string, ResponseOwner][] = [];
    for (const entry of this.cache.entries()) {
      if (out.length >= max) break;
      out.push(entry);
    }
    return out;
  }

  private create(settings: ResponseOwnerSettings): LRUCache<string, ResponseOwner> {
    return growingLru<string, ResponseOwner>(settings.maxEntries, {
      ttl: settings.ttlMs,
      updateAgeOnGet: true,
      // The injected clock, read on every check: tests move it, and no cached timestamp goes stale.
      perf: { now: () => this.clock.nowMs() },
      ttlResolution: 0,
    });
  }
}
