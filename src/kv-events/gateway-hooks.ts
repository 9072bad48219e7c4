// The gateway's few hooks into KV events: the view built from the config, and the engines it subscribes to.
import type { Logger } from "pino";
import type { BackendConfig, GatewayConfig } from "../config/schema.js";
import type { Clock, Timers } from "../core/clock.js";
import { KvCacheView, type KvEventsBackend } from "./kv-cache-view.js";

/** The view of engines' caches; it subscribes to engines when the backends are applied (backend-changes.ts). */
export function createKvCacheView(
  config: GatewayConfig,
  logger: Logger,
  clock: Clock,
  timers: Timers,
  replicaId: string,
): KvCacheView {
  return new KvCacheView({
    replayTimeoutMs: config.affinity.kv_events.replay_timeout_seconds * 1000,
    clock,
    timers,
    replicaId,
    onError: (backendId, err) =>
      logger.warn(
        { backend: backendId, err: err instanceof Error ? err.message : String(err) },
        "KV events: an engine's stream had a problem (its index may be incomplete until it recovers)",
      ),
  });
}

/** The backends (static and discovered) that publish KV events. */
export function kvEventsBackendsOf(backends: readonly BackendConfig[]): KvEventsBackend[] {
  const out: KvEventsBackend[] = [];
  for (const backend of backends) {
    const events = backend.kv_events;
    if (events === undefined) continue;
    out.push({
      id: backend.id,
      source: { endpoint: events.endpoint, replayEndpoint: events.replay_endpoint, topic: events.topic },
      maxBlocks: events.max_blocks,
    });
  }
  return out;
}
