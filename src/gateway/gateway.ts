// A running gateway's lifecycle: start (wire, discover, wait for shared stores, listen), reload, and close.
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { pino, type Logger } from "pino";
import type { BudgetStore } from "../admission/budget-store.js";
import { DnsDiscovery, dnsLookup, type EngineLookup } from "../backends/dns-discovery.js";
import type { EngineLoadPoller } from "../backends/engine-load-poller.js";
import type { HealthChecker } from "../backends/health-checker.js";
import type { RedisAttainedService } from "../admission/flow-queue/redis-attained-service.js";
import { backgroundTimers, systemClock, systemTimers, type Clock, type Timers } from "../core/clock.js";
import { GatewayError } from "../core/errors.js";
import { markDefaultFormat } from "../core/json-log-line.js";
import { SeededRandom, type Random } from "../core/random.js";
import type { GatewayConfig } from "../config/schema.js";
import { applyBackends, watchBackendHealth } from "./backend-changes.js";
import { BackendDrains } from "./backend-drain.js";
import { ConnectionGuard } from "./connection-guard.js";
import { defaultMaxConnections, openFileLimit } from "./connection-limit.js";
import { liveStateFrom } from "./live-state.js";
import { reloadGateway } from "./reload.js";
import type { GatewayParts, LiveState } from "./runtime.js";
import { createGatewayServer, type RequestWatcher } from "./server.js";
import { settingsFrom, type GatewaySettings } from "./settings.js";
import { InFlightRequests, shutDown } from "./shutdown.js";
import { checkEnvironment, randomHashKey, wireGateway } from "./wiring.js";

export interface GatewayOptions {
  clock?: Clock;
  /**
   * Where probes, queue timeouts and the binding sweep are scheduled: give ManualTimers on the ManualClock
   * above and they all run on it. The system's timers by default.
   */
  timers?: Timers;
  random?: Random;
  logger?: Logger;
  /** Where reloads read the config from; without it, /admin/reload and SIGHUP have nothing to read. */
  loadConfig?: () => Promise<GatewayConfig>;
  /** Overrides config.server for tests: listen on this host/port (0 = OS-assigned). */
  listen?: { host: string; port: number };
  /** How `discovery` entries are resolved (node's DNS resolver by default). */
  discoveryLookup?: EngineLookup;
  /** The sticky table's secret hash key (two 32-bit words); a fresh random one per process by default. */
  bindingHashKey?: readonly [number, number];
}

/** The parts of a running gateway, with the budgets of its current snapshot (for tests and tools). */
export interface GatewayView extends Omit<GatewayParts, "live"> {
  readonly budgets: BudgetStore;
  readonly settings: GatewaySettings;
}

/** Expired bindings are reclaimed in the background too, so an idle gateway's table shrinks. */
const SWEEP_INTERVAL_MS = 1000;
const SWEEP_BATCH = 10_000;
/**
 * How long a replica with shared stores waits for them before it listens. A replica that took traffic before
 * its connections were ready would place those sessions by rendezvous alone (so after a rolling restart it
 * would route them differently from the other replicas) and admit agents on its local budgets alone. Redis
 * down at startup delays the start by this much, never longer: then the replica starts deciding locally
 * (fail open) and reconnects by itself.
 */
const SHARED_STORE_STARTUP_WAIT_MS = 3000;

/** A server listening at `at`: its address once it listens. */
function listenOn(server: Server, at: { host: string; port: number }): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(at.port, at.host, () => {
      server.off("error", reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

/** http://host:port of a listening address (loopback form for wildcard hosts). */
function urlOf({ address, port, family }: AddressInfo): string {
  const host = address === "0.0.0.0" || address === "::" ? "127.0.0.1" : address;
  return family === "IPv6" && host !== "127.0.0.1" ? `http://[${host}]:${port}` : `http://${host}:${port}`;
}

/** server.max_connections, or the default the open-file limit allows for the config's own backends. */
function maxConnectionsOf(settings: GatewaySettings, fileLimit: number | undefined): number {
  if (settings.maxConnections !== undefined) return settings.maxConnections;
  const upstreamSockets = settings.backends.reduce(
    (sum, b) =>
      settings.discoveredIds.has(b.id) ? sum : sum + Math.min(b.max_inflight, settings.pools.connections) + 2,
    0,
  );
  return defaultMaxConnections(fileLimit, upstreamSockets);
}

export class Gateway {
  private readonly parts: GatewayParts;
  /** The live snapshot: swapped whole by a reload or a discovery change, read once per request. */
  private readonly live: { current: LiveState };
  private readonly server: Server;
  /** Serves /admin alone when server.admin_port is set (the API's server then does not). */
  private readonly adminServer: Server | undefined;
  private adminAddress: AddressInfo | undefined;
  private readonly health: HealthChecker;
  private readonly loadPoller: EngineLoadPoller;
  /** Removed engines whose in-flight requests are finishing (upstream.drain_seconds). */
  private readonly drains: BackendDrains;
  private readonly discovery: DnsDiscovery;
  /** The flows' attained service shared through admission.store when it is Redis. */
  private readonly sharedService: RedisAttainedService | undefined;
  private readonly random: Random;
  /** Cancels the next sweep of expired bindings. */
  private cancelSweep: () => void = () => undefined;
  private accepting = true;
  private readonly requests = new InFlightRequests();
  private address: AddressInfo | undefined;
  private readonly fileLimit = openFileLimit();
  private readonly connections: ConnectionGuard;

  private constructor(
    config: GatewayConfig,
    private readonly options: GatewayOptions,
  ) {
    checkEnvironment(config, "config");
    const clock = options.clock ?? systemClock;
    const logger = options.logger ?? markDefaultFormat(pino({ name: "agent-serve" }));
    this.random = options.random ?? new SeededRandom(0x5eed);
    const timers = options.timers ?? systemTimers;
    // Background loops do not keep the process alive on system timers; injected timers are used as given.
    const background = options.timers ?? backgroundTimers;
    const wired = wireGateway(config, {
      clock,
      timers,
      backgroundTimers: background,
      logger,
      random: this.random,
      bindingHashKey: options.bindingHashKey ?? randomHashKey(),
      probeSoon: (id) => this.health.probeSoon(id),
      receiptBlockTokens: () => this.live.current.settings.receipts.blockTokens,
      live: () => this.live.current,
    });
    this.health = wired.health;
    this.loadPoller = wired.loadPoller;
    this.sharedService = wired.sharedService;
    this.live = { current: liveStateFrom(wired.settings, wired.budgets, wired.parts) };
    this.parts = { ...wired.parts, live: this.live };
    this.drains = new BackendDrains(this.parts);
    watchBackendHealth(this.parts);

    this.discovery = new DnsDiscovery(config.discovery, {
      lookup: options.discoveryLookup ?? dnsLookup(config.health.probe_timeout_seconds * 1000),
      timers: background,
      onChange: () => {
        // The same config with the engines now found (the tier router's defaults follow their tiers).
        const settings = settingsFrom(this.live.current.settings.config, this.discovery.backends());
        const changed = this.applyBackends(settings);
        this.live.current = { ...this.live.current, settings };
        if (changed.length > 0) logger.info({ changed }, "discovered engines changed");
      },
      onError: (entry, err) =>
        logger.warn(
          { name: entry.name, err: err instanceof Error ? err.message : String(err) },
          "discovery lookup failed: keeping the engines it found last",
        ),
    });

    const hooks = {
      accepting: () => this.accepting,
      live: this.requests.live,
      reload: () => this.reloadFromSource(),
    };
    const ownAdminPort = config.server.admin_port !== undefined;
    const requests: RequestWatcher = {
      started: (socket) => {
        this.requests.started();
        this.connections.requestStarted(socket);
      },
      ended: (socket) => {
        this.connections.requestEnded(socket);
        this.requests.ended();
      },
    };
    this.server = createGatewayServer(
      this.parts,
      { ...hooks, requests },
      { api: true, admin: !ownAdminPort },
    );
    this.adminServer = ownAdminPort
      ? createGatewayServer(this.parts, hooks, { api: false, admin: true })
      : undefined;
    this.connections = new ConnectionGuard(this.server, maxConnectionsOf(wired.settings, this.fileLimit));
    const sweep = (): void => {
      void this.parts.bindings.sweep(clock.nowMs(), SWEEP_BATCH);
      this.cancelSweep = background.after(SWEEP_INTERVAL_MS, sweep);
    };
    this.cancelSweep = background.after(SWEEP_INTERVAL_MS, sweep);
  }

  static async start(config: GatewayConfig, options: GatewayOptions = {}): Promise<Gateway> {
    const gateway = new Gateway(config, options);
    await gateway.discovery.start();
    await gateway.waitForSharedStores();
    const at = options.listen ?? { host: config.server.host, port: config.server.port };
    gateway.address = await listenOn(gateway.server, at);
    if (gateway.adminServer !== undefined) {
      const admin = { host: config.server.admin_host ?? at.host, port: config.server.admin_port! };
      try {
        gateway.adminAddress = await listenOn(gateway.adminServer, admin);
      } catch (err) {
        await gateway.close(0);
        throw err;
      }
      gateway.parts.logger.info({ url: gateway.adminUrl }, "admin API listening on its own port");
    }
    gateway.health.start();
    gateway.loadPoller.start();
    return gateway;
  }

  /** The health prober (for tests: its probes' results). */
  get probes(): Pick<HealthChecker, "onProbe"> {
    return this.health;
  }

  /** The gateway's services and its current snapshot's budgets and settings (for tests and tools). */
  get runtime(): GatewayView {
    const { live: _live, ...parts } = this.parts;
    return { ...parts, budgets: this.live.current.budgets, settings: this.live.current.settings };
  }

  private async waitForSharedStores(): Promise<void> {
    const { bindings, logger } = this.parts;
    const [bindingsUp, budgetsUp] = await Promise.all([
      bindings.connected(SHARED_STORE_STARTUP_WAIT_MS),
      this.live.current.budgets.connected(SHARED_STORE_STARTUP_WAIT_MS),
    ]);
    for (const [store, up] of [
      ["bindings", bindingsUp],
      ["budgets", budgetsUp],
    ] as const) {
      if (!up)
        logger.warn(
          { store, waitedMs: SHARED_STORE_STARTUP_WAIT_MS },
          "redis store not reachable at startup: deciding locally until it is back",
        );
    }
  }

  /** http://host:port of the listening server (loopback form for wildcard hosts). */
  get url(): string {
    if (this.address === undefined) throw new GatewayError("internal_error", "gateway is not listening");
    return urlOf(this.address);
  }

  /** http://host:port of the admin server (server.admin_port), if there is one. */
  get adminUrl(): string | undefined {
    return this.adminAddress === undefined ? undefined : urlOf(this.adminAddress);
  }

  /** Client connections the server holds now (admin views, and tests that must know a socket was accepted). */
  openConnections(): Promise<number> {
    return new Promise((resolve, reject) =>
      this.server.getConnections((err, count) => (err ? reject(err) : resolve(count))),
    );
  }

  get port(): number {
    return this.address?.port ?? 0;
  }

  /** Applies a new config: backends added/updated/removed, affinity, health, admission, routing settings. */
  reload(config: GatewayConfig): { changed: string[] } {
    checkEnvironment(config, "reloaded config");
    const { changed, live } = reloadGateway(
      {
        parts: this.parts,
        live: this.live.current,
        health: this.health,
        loadPoller: this.loadPoller,
        connections: this.connections,
        server: this.server,
        random: this.random,
        maxConnections: (settings) => maxConnectionsOf(settings, this.fileLimit),
        discovered: () => this.discovery.backends(),
        applyBackends: (settings) => this.applyBackends(settings),
        configureDiscovery: (next) => void this.discovery.configure(next.discovery),
      },
      config,
    );
    if (live === undefined) {
      this.parts.logger.info({ changed: [] }, "config reloaded: no change");
      return { changed: [] };
    }
    this.live.current = live;
    this.parts.logger.info({ changed }, "config reloaded");
    return { changed };
  }

  /** The registry holds `settings`' backends (see backend-changes.ts). */
  private applyBackends(settings: GatewaySettings): string[] {
    return applyBackends(
      { ...this.parts, drains: this.drains },
      this.health,
      settings,
      this.live.current.settings.discoveredIds,
    );
  }

  private async reloadFromSource(): Promise<{ changed: string[] }> {
    if (this.options.loadConfig === undefined)
      throw new GatewayError("not_implemented", "this gateway was started without a config file");
    return this.reload(await this.options.loadConfig());
  }

  /** Re-reads the config file (SIGHUP); a bad file is reported and the running config stays. */
  async reloadOrReport(): Promise<void> {
    try {
      await this.reloadFromSource();
    } catch (err) {
      this.parts.logger.error(
        { err: err instanceof Error ? err.message : String(err) },
        "config reload refused",
      );
    }
  }

  /**
   * Stops accepting, lets in-flight requests finish for up to `graceMs`, then closes what is left and
   * releases every timer and connection.
   */
  async close(graceMs = this.live.current.settings.shutdownGraceMs): Promise<void> {
    this.accepting = false;
    await shutDown({ api: this.server, admin: this.adminServer }, this.requests, graceMs, async () => {
      this.cancelSweep();
      this.discovery.stop();
      this.parts.kvCache?.close();
      await this.health.stop();
      await this.loadPoller.stop();
      await this.parts.pools.close();
      await this.drains.close();
      await this.parts.bindings.flush();
      await this.parts.bindings.close();
      await this.parts.responseOwners.flush?.();
      await this.parts.responseOwners.close?.();
      const { budgets } = this.live.current;
      await budgets.flush();
      await budgets.close();
      await this.parts.receipts.memory.flush();
      await this.parts.receipts.memory.close();
      await this.sharedService?.close();
    });
  }
}
