// The store of Responses API owners (response id -> engine that stores it): its contract, kept in memory or Redis.
import type { ResponseOwner, ResponseOwnerSettings } from "./response-owners.js";

/**
 * Which engine stores each response, as every replica must see it: a conversation chained by
 * previous_response_id reaches any replica, and only the owner can continue it. The memory store
 * (ResponseOwners) answers at once; the Redis store (RedisResponseOwners) keeps a local view and asks Redis
 * for the ids it does not know.
 */
export interface ResponseOwnerStore {
  /** The response's owner, at once when this replica knows it; a use refreshes its TTL. Never rejects. */
  owner(responseId: string): ResponseOwner | undefined | Promise<ResponseOwner | undefined>;
  /**
   * Remembers the owner. Resolves once every replica can read it (a shared store: Redis acknowledged the
   * write, bounded by the store's timeout; fails open). Never rejects.
   */
  remember(responseId: string, owner: ResponseOwner): void | Promise<void>;
  forget(responseId: string): void;
  configure(settings: ResponseOwnerSettings): void;
  /** Owners this replica holds in memory. */
  readonly size: number;
  /** True when the store is shared by replicas: an answer then waits for its owner's write (read-your-writes). */
  readonly shared: boolean;
  flush?(): Promise<void>;
  close?(): Promise<void>;
}
