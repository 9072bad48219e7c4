// One log line per store outage per replica: the Redis links of a gateway (bindings, receipts, budgets, flows)
// share one server, so when it goes away they all notice; the first says so, the last back says it is back.
import type { RedisLinkOptions } from "./redis-link.js";

type LinkLogger = RedisLinkOptions["logger"];

/** A logger for a gateway's Redis links that turns their per-link outage lines into one per outage. */
export class StoreOutageLog implements LinkLogger {
  /** The links (by store name) that are down now. */
  private readonly down = new Set<string>();

  constructor(private readonly logger: LinkLogger) {}

  warn(fields: object, message: string): void {
    const store = storeOf(fields);
    const first = this.down.size === 0;
    this.down.add(store);
    if (first) this.logger.warn(fields, message);
  }

  info(fields: object, message: string): void {
    const store = storeOf(fields);
    const wasDown = this.down.delete(store);
    // A link that was never counted down (not an outage's end) is logged as it is.
    if (!wasDown || this.down.size === 0) this.logger.info(fields, message);
  }
}

function storeOf(fields: object): string {
  const store = (fields as { store?: unknown }).store;
  return typeof store === "string" ? store : "?";
}
