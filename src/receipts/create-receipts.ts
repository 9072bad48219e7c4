// Builds the gateway's route receipts from its config: memory beside the sticky table, or Redis beside the bindings.
import type { GatewayConfig } from "../config/schema.js";
import { redisConnection } from "../store/redis-connection.js";
import { RedisLink, type StoreHealthSink } from "../store/redis-link.js";
import { InMemoryReceipts, type ReceiptMemory } from "./receipt-memory.js";
import { RECEIPT_SCRIPTS, RedisReceipts } from "./redis-receipts.js";
import { TurnReceipts, type ReceiptSettings } from "./turn-receipts.js";

export interface ReceiptDeps {
  nowMs: () => number;
  logger: { warn(fields: object, message: string): void; info(fields: object, message: string): void };
  /** The shared store's health (the receipts share the bindings' Redis, and its health metrics). */
  health: StoreHealthSink;
  /** Read on every turn, so a reload's block size applies at once. */
  settings: ReceiptSettings;
}

export function createTurnReceipts(config: GatewayConfig, deps: ReceiptDeps): TurnReceipts {
  const { affinity } = config;
  const ttlMs = affinity.receipts.ttl_seconds * 1000;
  let memory: ReceiptMemory;
  if (affinity.store.kind === "redis") {
    const connection = redisConnection(affinity.store);
    const link = new RedisLink({
      ...connection,
      timeoutMs: affinity.store.timeout_ms,
      name: "receipts",
      scripts: RECEIPT_SCRIPTS,
      logger: deps.logger,
      health: deps.health,
    });
    memory = new RedisReceipts(link, affinity.store.key_prefix, ttlMs);
  } else {
    memory = new InMemoryReceipts(affinity.max_bindings, ttlMs, deps.nowMs);
  }
  return new TurnReceipts(memory, deps.settings, deps.nowMs);
}
