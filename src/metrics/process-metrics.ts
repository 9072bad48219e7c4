// The Node process's own metrics (prom-client's default set: CPU, memory, GC, event-loop lag), collected once per process.
import { Registry, collectDefaultMetrics } from "prom-client";

let shared: Registry | undefined;

/**
 * The registry of the process's default metrics, made on first use and shared by every gateway of the process.
 * Why not one per gateway: prom-client's collectors start a GC PerformanceObserver and an event-loop-delay
 * monitor that are never stopped, and through the registry they reach every metric's collect callback, so each
 * gateway (and all its tables, caches and engines' handles) stayed reachable after close: a study that started
 * a gateway per condition grew by about 270 MB per condition. These facts are the process's, not a gateway's,
 * so one set is also the truthful model. It holds nothing of any gateway: a gateway's scrape appends this
 * registry's text to its own.
 */
export function processMetrics(): Registry {
  if (shared === undefined) {
    shared = new Registry();
    collectDefaultMetrics({ register: shared });
  }
  return shared;
}
