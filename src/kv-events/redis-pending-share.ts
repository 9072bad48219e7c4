// Shared pending sends over Redis pub/sub (shared-pending.ts): the replicas of a gateway whose bindings live in
// Redis tell each other the prompts they send engines that publish KV events.
import type { RedisStoreConfig } from "../config/schema.js";
import { redisConnection } from "../store/redis-connection.js";
import { RedisLink, type RedisLinkOptions } from "../store/redis-link.js";
import { RedisSubscription } from "../store/redis-subscription.js";
import type { KvCacheView } from "./kv-cache-view.js";
import {
  decodeSharedPending,
  encodeSharedPending,
  type PendingShare,
  type SharedPendingMessage,
} from "./shared-pending.js";

/** The channel, under the binding store's key prefix. */
export function sharedPendingChannel(keyPrefix: string): string {
  return keyPrefix + "kv-pending";
}

/**
 * Connects `view` to the fleet's channel: its sends are published there, the others' applied to it. Two
 * connections of its own (a subscriber cannot publish); both fail open: while Redis is away each replica knows
 * its own sends only, as without a shared store, and what was missed meanwhile is forgotten.
 */
export function shareKvPendingOverRedis(
  view: KvCacheView,
  store: RedisStoreConfig,
  deps: Pick<RedisLinkOptions, "logger" | "health"> & {
    onInvalid?: (err: unknown) => void;
    /** Called after each message from the channel was applied (tools and tests wait on it, not on time). */
    onMessage?: () => void;
  },
): PendingShare & { whenLive(): Promise<void> } {
  const connection = redisConnection(store);
  const channel = sharedPendingChannel(store.key_prefix);
  const link = new RedisLink({
    ...connection,
    timeoutMs: store.timeout_ms,
    name: "kv-pending",
    scripts: [],
    logger: deps.logger,
    health: deps.health,
  });
  const subscription = new RedisSubscription(
    connection.url,
    channel,
    (text) => {
      try {
        view.applyShared(decodeSharedPending(text));
      } catch (err) {
        deps.onInvalid?.(err);
      }
      deps.onMessage?.();
    },
    () => view.forgetShared(),
    connection.tls,
  );
  const share = {
    /** Resolves once this replica hears the channel and can publish on it (tools and tests wait on it). */
    whenLive: async (): Promise<void> => {
      await subscription.whenLive();
      while (!(await link.connected(1_000)));
    },
    // Until this replica hears the channel it knows its own sends only; publishing meanwhile still helps others.
    publish: (message: SharedPendingMessage): Promise<void> =>
      link.publish(channel, encodeSharedPending(message)),
    get hearing(): boolean {
      return subscription.live;
    },
    close: async (): Promise<void> => {
      await subscription.close();
      await link.close();
    },
  };
  view.share(share);
  return share;
}
