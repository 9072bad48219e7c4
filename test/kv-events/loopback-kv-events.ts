// A simulated engine's KV-event config on loopback, OS-assigned ports: what the kv-events tests and benches start.
import { parseKvEventsConfig, type KvEventsConfig } from "../../src/sim/kv-events-config.js";

/** vLLM's --kv-events-config for a simulated engine publishing on loopback, its replay socket beside it. */
export function loopbackKvEvents(): KvEventsConfig {
  const config = parseKvEventsConfig(
    JSON.stringify({
      enable_kv_cache_events: true,
      endpoint: "tcp://127.0.0.1:0",
      replay_endpoint: "tcp://127.0.0.1:0",
      topic: "kv-events",
    }),
  );
  if (config === undefined) throw new Error("the loopback KV-event config did not parse");
  return config;
}
