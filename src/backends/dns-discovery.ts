// Engines from DNS: each discovery entry's name resolved every refresh_seconds into backends of its tier.
import { Resolver } from "node:dns/promises";
import type { BackendConfig, DiscoveryConfig } from "../config/schema.js";
import type { Timers } from "../core/clock.js";

/** One engine a DNS answer names. */
export interface DiscoveredEngine {
  host: string;
  port: number;
}

/** Resolves one entry's name; throws on failure (the caller keeps what it had). */
export type EngineLookup = (entry: DiscoveryConfig) => Promise<DiscoveredEngine[]>;

/** Answers that say "no such engines" (an authoritative empty set), unlike a DNS outage. */
const EMPTY_ANSWER_CODES = new Set(["ENOTFOUND", "ENODATA"]);

/** node's resolver, asking the entry's own servers when it names some (a test's loopback DNS server). */
export function dnsLookup(timeoutMs: number): EngineLookup {
  const resolvers = new Map<string, Resolver>();
  const resolverFor = (servers: readonly string[] | undefined): Resolver => {
    const key = (servers ?? []).join(",");
    let resolver = resolvers.get(key);
    if (resolver === undefined) {
      resolver = new Resolver({ timeout: timeoutMs, tries: 2 });
      if (servers !== undefined && servers.length > 0) resolver.setServers([...servers]);
      resolvers.set(key, resolver);
    }
    return resolver;
  };
  return async (entry) => {
    const resolver = resolverFor(entry.servers);
    try {
      if (entry.type === "SRV") {
        const records = await resolver.resolveSrv(entry.name);
        return records.map((r) => ({ host: r.name, port: r.port }));
      }
      const addresses =
        entry.type === "AAAA" ? await resolver.resolve6(entry.name) : await resolver.resolve4(entry.name);
      return addresses.map((address) => ({ host: address, port: entry.port! }));
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (typeof code === "string" && EMPTY_ANSWER_CODES.has(code)) return [];
      throw err;
    }
  };
}

/** The backend of one discovered engine; its id is stable for as long as the address and port are. */
export function backendOf(entry: DiscoveryConfig, engine: DiscoveredEngine): BackendConfig {
  const host = engine.host.replace(/\.$/, "");
  const urlHost = host.includes(":") ? `[${host}]` : host;
  const id = `${entry.tier}.${host}.${engine.port}`.replace(/[^A-Za-z0-9._-]/g, "-").slice(0, 64);
  return {
    id,
    tier: entry.tier,
    base_url: `${entry.scheme}://${urlHost}:${engine.port}`,
    model: entry.model,
    max_inflight: entry.max_inflight,
    weight: entry.weight,
    kv_events:
      entry.kv_events === undefined
        ? undefined
        : {
            endpoint: `tcp://${urlHost}:${entry.kv_events.port}`,
            replay_endpoint:
              entry.kv_events.replay_port === undefined
                ? undefined
                : `tcp://${urlHost}:${entry.kv_events.replay_port}`,
            topic: entry.kv_events.topic,
            max_blocks: entry.kv_events.max_blocks,
          },
  };
}

export interface DiscoveryOptions {
  lookup: EngineLookup;
  /** Called with every entry's current backends whenever one entry's answer changed. */
  onChange: (discovered: readonly BackendConfig[]) => void;
  onError: (entry: DiscoveryConfig, err: unknown) => void;
  /** Where the refreshes are scheduled: a background loop (the system's unref'd timers, a manual clock's in tests). */
  timers: Timers;
}

/** Re-resolves each entry on its own timer; a failed lookup keeps the entry's last answer. */
export class DnsDiscovery {
  private readonly current = new Map<number, BackendConfig[]>();
  /** Each entry's scheduled refresh, as the cancel its timer returned. */
  private readonly cancels = new Map<number, () => void>();
  private running = false;

  constructor(
    private entries: readonly DiscoveryConfig[],
    private readonly options: DiscoveryOptions,
  ) {}

  /** Resolves every entry once (so the gateway starts with its engines known), then keeps refreshing. */
  async start(): Promise<void> {
    this.running = true;
    await Promise.all(this.entries.map((_, index) => this.refresh(index, false)));
    this.options.onChange(this.backends());
    this.entries.forEach((_, index) => this.schedule(index));
  }

  /** The entries of a reloaded config; answers of entries that left are dropped. */
  async configure(entries: readonly DiscoveryConfig[]): Promise<void> {
    this.stopTimers();
    this.entries = entries;
    this.current.clear();
    if (this.running) await this.start();
  }

  backends(): BackendConfig[] {
    const seen = new Set<string>();
    const out: BackendConfig[] = [];
    for (const list of this.current.values()) {
      for (const backend of list) {
        if (seen.has(backend.id)) continue;
        seen.add(backend.id);
        out.push(backend);
      }
    }
    return out;
  }

  stop(): void {
    this.running = false;
    this.stopTimers();
  }

  private stopTimers(): void {
    for (const cancel of this.cancels.values()) cancel();
    this.cancels.clear();
  }

  private schedule(index: number): void {
    const entry = this.entries[index];
    if (!this.running || entry === undefined) return;
    const entries = this.entries;
    const cancel = this.options.timers.after(entry.refresh_seconds * 1000, () => {
      this.cancels.delete(index);
      // A reload while this lookup ran has scheduled the new entries already: this loop ends here.
      void this.refresh(index, true).finally(() => {
        if (this.entries === entries) this.schedule(index);
      });
    });
    this.cancels.set(index, cancel);
  }

  private async refresh(index: number, notify: boolean): Promise<void> {
    const entry = this.entries[index]!;
    let engines: DiscoveredEngine[];
    try {
      engines = await this.options.lookup(entry);
    } catch (err) {
      this.options.onError(entry, err);
      return;
    }
    if (!this.running || this.entries[index] !== entry) return;
    const next = engines.map((engine) => backendOf(entry, engine)).sort((a, b) => (a.id < b.id ? -1 : 1));
    const previous = this.current.get(index) ?? [];
    const same = previous.length === next.length && previous.every((b, i) => b.id === next[i]!.id);
    this.current.set(index, next);
    if (notify && !same) this.options.onChange(this.backends());
  }
}
