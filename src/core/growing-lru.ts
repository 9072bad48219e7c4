// LRU caches capped by an entry count whose memory grows with the entries they hold, not with the cap.
import { LRUCache } from "lru-cache";

/** What lru-cache accepts as a key or a value: anything but null and undefined. */
type Present = NonNullable<unknown>;

type GrowingLruOptions<K extends Present, V extends Present> = Pick<
  LRUCache.Options<K, V, unknown>,
  "ttl" | "ttlResolution" | "updateAgeOnGet" | "perf"
>;

/**
 * An LRU cache of at most `maxEntries` entries (least recently used forgotten first).
 *
 * Why not lru-cache's `max`: given `max`, lru-cache allocates its key, value and link arrays (and with a TTL two
 * timestamp arrays) for `max` entries when it is made, about 44 bytes an entry: 44 MB for the default 1,000,000
 * before one entry is stored, per cache and per gateway, and tens of milliseconds of start-up. Counting each entry
 * as size 1 against `maxSize` caps the count the same way, with the same eviction order, and the arrays grow
 * as entries arrive.
 */
export function growingLru<K extends Present, V extends Present>(
  maxEntries: number,
  options: GrowingLruOptions<K, V> = {},
): LRUCache<K, V> {
  return new LRUCache<K, V>({ ...options, maxSize: maxEntries, sizeCalculation: () => 1 });
}
