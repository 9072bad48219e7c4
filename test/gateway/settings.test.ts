// The settings snapshot: one pure derivation from a config, the same whether a gateway starts with a config or
// reloads to it, and swapped whole by a reload (a request keeps the snapshot it started with).
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { settingsFrom } from "../../src/gateway/settings.js";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";
import { SMALL_MODEL } from "../helpers/cluster.js";

function configWith(url: string, extra: Record<string, unknown> = {}): ReturnType<typeof parseConfig> {
  return parseConfig(
    {
      server: { host: "127.0.0.1", port: 0 },
      health: { probe_interval_seconds: 3600, engine_metrics_interval_seconds: 2 },
      backends: [{ id: "small-0", tier: "small", base_url: url, model: SMALL_MODEL }],
      ...extra,
    },
    "test",
  );
}

describe("settingsFrom", () => {
  it("derives every setting in the units the code uses, and is pure", () => {
    const config = configWith("http://127.0.0.1:9", {
      upstream: { first_byte_timeout_seconds: 1.5, max_attempts: 4 },
      admission: { queue_timeout_seconds: 2, agents: { a: { token_budget: 99 } } },
      affinity: { sticky_ttl_seconds: 30 },
    });
    const settings = settingsFrom(config);
    expect(settings.firstByteTimeoutMs).toBe(1500);
    expect(settings.maxAttempts).toBe(4);
    expect(settings.queue.queueTimeoutMs).toBe(2000);
    expect(settings.budgets.overrides.get("a")).toBe(99);
    expect(settings.scheduler.stickyTtlMs).toBe(30_000);
    // Three missed engine readings (every 2 s) and a reading is too old to place by.
    expect(settings.scheduler.engineSignalMaxAgeMs).toBe(6000);
    expect(settings.loadPoll.intervalMs).toBe(2000);
    expect(settings.tiers.defaultTier).toBe("small");
    // Same inputs, same settings; the config is not changed.
    const before = JSON.stringify(config);
    expect(settingsFrom(config)).toEqual(settings);
    expect(JSON.stringify(config)).toBe(before);
  });
});

describe("the live snapshot", () => {
  const engines: SimEngineHandle[] = [];
  let gateway: Gateway | undefined;
  afterEach(async () => {
    await gateway?.close(0);
    gateway = undefined;
    await Promise.all(engines.splice(0).map((e) => e.close()));
  });

  it("is the same after a reload to a config as after a start with it, and is swapped whole", async () => {
    engines.push(await startSimEngine({ model: SMALL_MODEL }));
    const url = engines[0]!.url;
    const first = configWith(url);
    const second = configWith(url, {
      upstream: { first_byte_timeout_seconds: 7, max_attempts: 2 },
      affinity: { sticky_ttl_seconds: 60, load_factor: 1.5 },
      responses: { ttl_seconds: 30 },
    });
    gateway = await Gateway.start(first, { logger: pino({ level: "silent" }) });
    const started = gateway.runtime.settings;
    expect(started).toEqual(settingsFrom(first));
    gateway.reload(second);
    const reloaded = gateway.runtime.settings;
    expect(reloaded).not.toBe(started);
    expect(reloaded).toEqual(settingsFrom(second));
    // The snapshot a request read before the reload is untouched by it.
    expect(started).toEqual(settingsFrom(first));
    // A reload to the same config changes nothing, not even the snapshot.
    expect(gateway.reload(second).changed).toEqual([]);
    expect(gateway.runtime.settings).toBe(reloaded);
  });
});
