// DNS discovery's refresh loop on a manual clock: when it asks, what a failed answer keeps, and that a reload
// while a lookup is in flight leaves one loop per entry.
import { describe, expect, it } from "vitest";
import { DnsDiscovery, type DiscoveredEngine } from "../../src/backends/dns-discovery.js";
import type { BackendConfig, DiscoveryConfig } from "../../src/config/schema.js";
import { discoverySchema } from "../../src/config/shared-state.js";
import { ManualClock, ManualTimers } from "../../src/core/clock.js";

function entries(...names: string[]): DiscoveryConfig[] {
  return discoverySchema.parse(
    names.map((name) => ({ name, tier: "small", type: "SRV", model: "m", refresh_seconds: 5 })),
  );
}

/** A lookup whose answers the test hands out one by one, in the order they were asked for. */
class ScriptedLookup {
  readonly asked: string[] = [];
  private readonly waiting: { resolve: (e: DiscoveredEngine[]) => void; reject: (e: Error) => void }[] = [];
  private wake: (() => void) | undefined;

  readonly lookup = (entry: DiscoveryConfig): Promise<DiscoveredEngine[]> => {
    this.asked.push(entry.name);
    this.wake?.();
    return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
  };

  /** Waits until `count` lookups have been asked for in all. */
  async askedFor(count: number): Promise<void> {
    while (this.asked.length < count) await new Promise<void>((resolve) => (this.wake = resolve));
  }

  answer(...ports: number[]): void {
    this.waiting.shift()!.resolve(ports.map((port) => ({ host: "127.0.0.1", port })));
  }

  fail(): void {
    this.waiting.shift()!.reject(new Error("SERVFAIL"));
  }
}

function startDiscovery(config: DiscoveryConfig[]) {
  const timers = new ManualTimers(new ManualClock());
  const lookup = new ScriptedLookup();
  const changes: BackendConfig[][] = [];
  const errors: string[] = [];
  let changed: (() => void) | undefined;
  const discovery = new DnsDiscovery(config, {
    lookup: lookup.lookup,
    timers,
    onChange: (backends) => {
      changes.push([...backends]);
      changed?.();
    },
    onError: (_entry, err) => errors.push(err instanceof Error ? err.message : String(err)),
  });
  const nextChange = () => new Promise<void>((resolve) => (changed = resolve));
  return { timers, lookup, changes, errors, discovery, nextChange };
}

/** A discovery of one entry, started with its first lookup answered by `ports`. */
async function startedWith(...ports: number[]): Promise<ReturnType<typeof startDiscovery>> {
  const d = startDiscovery(entries("_http._tcp.a.test"));
  const started = d.discovery.start();
  await d.lookup.askedFor(1);
  d.lookup.answer(...ports);
  await started;
  return d;
}

/** Lets every pending promise reaction run (one turn of the event loop; no time passes on any clock). */
const drained = () => new Promise<void>((resolve) => setImmediate(resolve));

const ports = (backends: readonly BackendConfig[]) => backends.map((b) => Number(new URL(b.base_url).port));

describe("DnsDiscovery", () => {
  it("asks again every refresh_seconds on the timers it is given, and reports only answers that changed", async () => {
    const d = await startedWith(8001);
    expect(d.changes.map(ports)).toEqual([[8001]]);
    expect(d.timers.size).toBe(1);

    d.timers.advance(4_999);
    expect(d.lookup.asked).toHaveLength(1);
    d.timers.advance(1);
    await d.lookup.askedFor(2);
    const change = d.nextChange();
    d.lookup.answer(8001, 8002);
    await change;
    await drained(); // the loop schedules its next lookup once this one has ended
    expect(d.changes.map(ports)).toEqual([[8001], [8001, 8002]]);

    // The same answer again: no change reported, the loop goes on.
    d.timers.advance(5_000);
    await d.lookup.askedFor(3);
    d.lookup.answer(8002, 8001);
    await drained();
    expect(d.changes).toHaveLength(2);
    expect(d.timers.size).toBe(1);
    d.discovery.stop();
    expect(d.timers.size).toBe(0);
  });

  it("keeps the last answer when a lookup fails, and keeps asking", async () => {
    const d = await startedWith(8001);
    d.timers.advance(5_000);
    await d.lookup.askedFor(2);
    d.lookup.fail();
    await drained();
    expect(d.timers.size).toBe(1);
    expect(d.errors).toEqual(["SERVFAIL"]);
    expect(ports(d.discovery.backends())).toEqual([8001]);
    d.timers.advance(5_000);
    await d.lookup.askedFor(3);
    const change = d.nextChange();
    d.lookup.answer(8003);
    await change;
    expect(ports(d.discovery.backends())).toEqual([8003]);
    d.discovery.stop();
  });

  it("a reload while a lookup is in flight leaves one refresh loop per entry", async () => {
    const d = await startedWith(8001);
    d.timers.advance(5_000);
    await d.lookup.askedFor(2); // the old entry's refresh, still unanswered

    const reloaded = d.discovery.configure(entries("_http._tcp.b.test"));
    await d.lookup.askedFor(3);
    d.lookup.answer(8001); // the old refresh ends after the reload began
    d.lookup.answer(9001); // the new entry's first lookup
    await reloaded;
    await drained();
    expect(ports(d.discovery.backends())).toEqual([9001]);
    expect(d.timers.size).toBe(1);
    d.timers.advance(5_000);
    expect(d.lookup.asked.slice(3)).toEqual(["_http._tcp.b.test"]);
    d.discovery.stop();
  });
});
