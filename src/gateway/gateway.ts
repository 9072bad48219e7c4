// Builds a running gateway from a config: wires registry, scheduler, health, slots, pools, metrics and HTTP.
import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import { pino, type Logger } from "pino";
import { createBalancer } from "../affinity/balancers.js";
import { ResponseOwners } from "../affinity/response-owners.js";
import { createPolicy } from "../affinity/policies/create-policy.js";
import { PlacementService } from "../affinity/placement-service.js";
import { StickyTable } from "../affinity/sticky-table.js";
import { BINDING_SCRIPTS, RedisBindings } from "../affinity/redis-bindings.js";
import { RedisBindingStore } from "../affinity/redis-binding-store.js";
import { MemoryBindingStore } from "../affinity/memory-bindings.js";
import { RedisSubscription } from "../store/redis-subscription.js";
import type { BindingStore } from "../affinity/binding-store.js";
import { BackendSlots } from "../admission/backend-slots.js";
import { AttainedService } from "../admission/flow-queue/attained-service.js";
import {
  RedisAttainedService,
  sharedAttainedService,
} from "../admission/flow-queue/redis-attained-service.js";
import { attainedServiceSettingsOf, queueSettingsOf } from "../admission/queue-settings.js";
import type { BudgetStore } from "../admission/budget-store.js";
import { RedisBudgetStore } from "../admission/redis-budget-store.js";
import { TokenBudgets, type BudgetSettings } from "../admission/token-budgets.js";
import { RedisLink } from "../store/redis-link.js";
import { createTurnReceipts } from "../receipts/create-receipts.js";
import { missingApiKeyEnv } from "../backends/backend.js";
import { ConfigError } from "../config/load.js";
import { EngineLoadPoller, type LoadPollSettings } from "../backends/engine-load-poller.js";
import { DnsDiscovery, dnsLookup, type EngineLookup } from "../backends/dns-discovery.js";
import { HealthChecker } from "../backends/health-checker.js";
import type { HealthThresholds } from "../backends/health-state.js";
import { BackendRegistry } from "../backends/registry.js";
import { systemClock, systemTimers, type Clock } from "../core/clock.js";
import { SeededRandom, type Random } from "../core/random.js";
import type { BackendConfig, GatewayConfig } from "../config/schema.js";
import { GatewayMetrics } from "../metrics/gateway-metrics.js";
import { TierClassifier } from "../routing/tier-classifier.js";
import { resolveTierSettings } from "../routing/tier-router.js";
import { AttemptTracker } from "./attempt-tracker.js";
import { createClassifierAsk } from "./classifier-client.js";
import { EngineOutcomes } from "./engine-outcomes.js";
import type { GatewayRuntime, RuntimeSettings } from "./runtime.js";
import { clientTimeoutsMs, createGatewayServer } from "./server.js";
import { redisConnection, redisEnvProblems } from "../store/redis-connection.js";
import { UpstreamPools } from "./upstream-pools.js";
import { GatewayError } from "../core/errors.js";
import { cancelRequest, type RequestContext } from "./request-context.js";
import { defaultMaxConnections, openFileLimit } from "./connection-limit.js";
import { ConnectionGuard } from "./connection-guard.js";

export interface GatewayOptions {
  clock?: Clock;
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

/** Unpredictable to clients, so they cannot craft session ids that collide in the table's index. */
function randomHashKey(): [number, number] {
  const bytes = randomBytes(8);
  return [bytes.readInt32LE(0), bytes.readInt32LE(4)];
}

/** After the grace, how long cancelled requests get to write their last bytes before connections close. */
const SHUTDOWN_FLUSH_MS = 500;

/** Expired bindings are reclaimed in the background too, so an idle gateway's table shrinks. */
const SWEEP_INTERVAL_MS = 1000;
/**
 * How long a replica with shared stores waits for them before it listens. A replica that took traffic before
 * its connections were ready would place those sessions by rendezvous alone (so after a rolling restart it
 * would route them differently from the other replicas) and admit agents on its local budgets alone. Redis
 * down at startup delays the start by this much, never longer: then the replica starts deciding locally
 * (fail open) and reconnects by itself.
 */
const SHARED_STORE_STARTUP_WAIT_MS = 3000;
const SWEEP_BATCH = 10_000;

function loadPollSettings(config: GatewayConfig): LoadPollSettings {
  return {
    intervalMs: config.health.engine_metrics_interval_seconds * 1000,
    timeoutMs: config.health.probe_timeout_seconds * 1000,
  };
}

/** Three missed readings and an engine's own load is too old to place by. */
function engineSignalMaxAgeMs(config: GatewayConfig): number {
  const intervalMs = config.health.engine_metrics_interval_seconds * 1000;
  return intervalMs > 0 ? 3 * intervalMs : 0;
}

function responseOwnerSettings(config: GatewayConfig): { ttlMs: number; maxEntries: number } {
  return { ttlMs: config.responses.ttl_seconds * 1000, maxEntries: config.responses.max_entries };
}

function budgetSettings(config: GatewayConfig): BudgetSettings {
  return {
    windowMs: config.admission.budget_window_seconds * 1000,
    defaultBudget: config.admission.default_token_budget,
    overrides: new Map(
      Object.entries(config.admission.agents).map(([agent, entry]) => [agent, entry.token_budget]),
    ),
    maxAgents: config.admission.max_agents,
  };
}

/** Refuses a config whose backends or stores name environment variables (or files) that are not there. */
function checkEnvironment(config: GatewayConfig, source: string): void {
  const problems = missingApiKeyEnv(config.backends);
  if (config.affinity.store.kind === "redis")
    problems.push(...redisEnvProblems(config.affinity.store, "affinity.store"));
  if (config.admission.store.kind === "redis")
    problems.push(...redisEnvProblems(config.admission.store, "admission.store"));
  if (problems.length > 0) throw new ConfigError(source, problems);
}

function deriveSettings(config: GatewayConfig, tiers: readonly string[]): RuntimeSettings {
  return {
    config,
    tiers: resolveTierSettings(config.routing, tiers),
    maxBodyBytes: config.server.max_body_bytes,
    maxAttempts: config.upstream.max_attempts,
    firstByteTimeoutMs: config.upstream.first_byte_timeout_seconds * 1000,
    streamFirstByteTimeoutMs: config.upstream.stream_first_byte_timeout_seconds * 1000,
    streamHeadersTimeoutMs: config.upstream.stream_headers_timeout_seconds * 1000,
    maxResponseBytes: config.upstream.max_response_bytes,
    requestTimeoutMs: config.upstream.request_timeout_seconds * 1000,
    adminToken: config.server.admin_token,
    apiKeys: new Map(
      config.server.api_keys.map((key) => [
        key.sha256,
        { agentId: key.agent_id, maxPriority: key.max_priority },
      ]),
    ),
    adaptation: {
      flattenNamespaces: config.adaptation.flatten_namespaces,
      dropHostedTools: config.adaptation.drop_hosted_tools,
    },
  };
}

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

/** server.max_connections, or the default the open-file limit allows (read once, at start). */
function maxConnectionsOf(config: GatewayConfig, fileLimit: number | undefined): number {
  if (config.server.max_connections !== undefined) return config.server.max_connections;
  const upstreamSockets = config.backends.reduce(
    (sum, b) => sum + Math.min(b.max_inflight, config.upstream.keep_alive_connections) + 2,
    0,
  );
  return defaultMaxConnections(fileLimit, upstreamSockets);
}

/** The budget store the config names: this process's own, or the replicas' shared one in Redis. */
function createBudgetStore(config: GatewayConfig, metrics: GatewayMetrics, logger: Logger): BudgetStore {
  const store = config.admission.store;
  if (store.kind === "memory") return new TokenBudgets(budgetSettings(config));
  return new RedisBudgetStore(budgetSettings(config), {
    keyPrefix: store.key_prefix,
    link: { ...redisConnection(store), timeoutMs: store.timeout_ms, logger, health: metrics.budgetStore },
  });
}

/** The tier classifier of the runtime's current config, or undefined when it is off. */
function createClassifier(rt: GatewayRuntime): TierClassifier | undefined {
  const { routing } = rt.settings.config;
  const settings = routing.classifier;
  if (!settings.enabled) return undefined;
  const { defaultTier, longPromptTier } = rt.settings.tiers;
  const choices =
    settings.tiers ??
    (longPromptTier !== undefined && longPromptTier !== defaultTier
      ? [defaultTier, longPromptTier]
      : rt.registry.tiers());
  return new TierClassifier({
    tiers: choices,
    ask: createClassifierAsk(rt, {
      tier: settings.tier ?? rt.settings.tiers.defaultTier,
      model: settings.model,
      prompt: settings.prompt,
    }),
    clock: rt.clock,
    timeoutMs: settings.timeout_ms,
    cacheTtlMs: (settings.cache_ttl_seconds ?? routing.classifier_cache_ttl_seconds) * 1000,
    maxEntries: settings.max_entries,
    record: (outcome, seconds) => rt.metrics.classifier(outcome, seconds),
  });
}

function thresholdsOf(config: GatewayConfig): HealthThresholds {
  const { health } = config;
  return {
    failuresToMarkDown: health.failures_to_mark_down,
    successesToMarkUp: health.successes_to_mark_up,
    ejection: {
      consecutiveFailures: health.ejection_consecutive_failures,
      baseMs: health.ejection_base_seconds * 1000,
      maxMs: Math.max(health.ejection_max_seconds, health.ejection_base_seconds) * 1000,
      stallMs: health.engine_metrics_interval_seconds > 0 ? health.stall_seconds * 1000 : 0,
    },
  };
}

export class Gateway {
  readonly runtime: GatewayRuntime;
  private readonly server: Server;
  /** Serves /admin alone when server.admin_port is set (the API's server then does not). */
  private readonly adminServer: Server | undefined;
  private adminAddress: AddressInfo | undefined;
  private readonly health: HealthChecker;
  private readonly loadPoller: EngineLoadPoller;
  private readonly discovery: DnsDiscovery;
  private discoveredIds = new Set<string>();
  private readonly bindingStore: BindingStore;
  private readonly random: Random;
  private readonly sweepTimer: NodeJS.Timeout;
  private accepting = true;
  private activeRequests = 0;
  /** Requests in progress, so that a shutdown's end can close each one properly (streams with an error event). */
  private readonly live = new Set<RequestContext>();
  /** Resolved (and cleared) when the last in-flight request ends: shutdown waits on it. */
  private onIdle: (() => void) | undefined;
  private address: AddressInfo | undefined;
  private readonly fileLimit = openFileLimit();
  private readonly connections: ConnectionGuard;
  /** The flows' attained service shared through admission.store when it is Redis. */
  private readonly sharedService: RedisAttainedService | undefined;

  private constructor(
    config: GatewayConfig,
    private readonly options: GatewayOptions,
  ) {
    checkEnvironment(config, "config");
    const clock = options.clock ?? systemClock;
    const logger = options.logger ?? pino({ name: "agent-serve" });
    const registry = new BackendRegistry(config.backends, thresholdsOf(config), clock);
    const slots = new BackendSlots(
      queueSettingsOf(config),
      new AttainedService(attainedServiceSettingsOf(config), clock),
    );
    const random = options.random ?? new SeededRandom(0x5eed);
    this.random = random;
    const store = new StickyTable(config.affinity.max_bindings, options.bindingHashKey ?? randomHashKey());
    let sharedBindings: RedisBindingStore | undefined;
    const metrics = new GatewayMetrics({
      backends: () =>
        [...registry.all()].map((b) => ({
          id: b.id,
          tier: b.tier,
          up: b.state !== "down",
          inflight: b.inflight,
          bindings: store.countFor(b.id),
          engineLoad: b.engineLoad,
        })),
      queueDepth: () => slots.depth,
    });
    metrics.flows.attach(slots, config.admission.scheduling.metrics_top_flows);
    this.sharedService = sharedAttainedService(config, slots.service, {
      clock,
      timers: systemTimers,
      logger,
      // The budgets' store is the same Redis: its errors count there; its up gauge stays the budgets' link's.
      health: { up: () => undefined, error: () => metrics.budgetStore.error() },
    });
    const storeConfig = config.affinity.store;
    if (storeConfig.kind === "redis") {
      const connection = redisConnection(storeConfig);
      const link = new RedisLink({
        ...connection,
        timeoutMs: storeConfig.timeout_ms,
        name: "bindings",
        scripts: BINDING_SCRIPTS,
        logger,
        health: metrics.bindingStore,
      });
      const remote = new RedisBindings(
        link,
        storeConfig.key_prefix,
        config.affinity.sticky_ttl_seconds * 1000,
      );
      const replicated = new RedisBindingStore({
        local: store,
        remote,
        stickyTtlMs: config.affinity.sticky_ttl_seconds * 1000,
      });
      sharedBindings = replicated;
      replicated.useInvalidations(
        new RedisSubscription(
          connection.url,
          remote.invalidationChannel,
          (message) => replicated.invalidate(message),
          () => replicated.forgetConfirmed(),
          connection.tls,
        ),
      );
    }
    const bindingStore: BindingStore = sharedBindings ?? new MemoryBindingStore(store);
    this.bindingStore = bindingStore;
    const scheduler = new PlacementService({
      store: bindingStore,
      clock,
      balancer: createBalancer(config.affinity.balancer, random),
      recorder: metrics,
      stickyTtlSeconds: config.affinity.sticky_ttl_seconds,
      rebalanceOnRecovery: config.affinity.rebalance_on_backend_recovery,
      loadFactor: config.affinity.load_factor,
      sessionless: config.affinity.sessionless,
      engineSignalMaxAgeMs: engineSignalMaxAgeMs(config),
      policy: createPolicy(config.affinity, random, engineSignalMaxAgeMs(config)),
    });
    this.health = new HealthChecker(registry, {
      intervalMs: config.health.probe_interval_seconds * 1000,
      timeoutMs: config.health.probe_timeout_seconds * 1000,
    });
    this.loadPoller = new EngineLoadPoller(registry, clock, loadPollSettings(config));
    const pools = new UpstreamPools({
      connectTimeoutMs: config.upstream.connect_timeout_seconds * 1000,
      connections: config.upstream.keep_alive_connections,
      idleTimeoutMs: config.upstream.idle_connection_timeout_seconds * 1000,
    });
    const attempts = new AttemptTracker();
    const runtime: GatewayRuntime = {
      clock,
      logger,
      registry,
      scheduler,
      slots,
      pools,
      metrics,
      attempts,
      attemptEnv: {
        nowMs: () => clock.nowMs(),
        get firstByteTimeoutMs() {
          return runtime.settings.firstByteTimeoutMs;
        },
        get streamFirstByteTimeoutMs() {
          return runtime.settings.streamFirstByteTimeoutMs;
        },
        get streamHeadersTimeoutMs() {
          return runtime.settings.streamHeadersTimeoutMs;
        },
        get maxResponseBytes() {
          return runtime.settings.maxResponseBytes;
        },
        freshConnection: (backend) => pools.fresh(backend),
        logger,
        track: (backendId, abort) => attempts.track(backendId, abort),
        firstToken: (tier, seconds) => metrics.firstToken(tier, seconds),
      },
      responseOwners: new ResponseOwners(clock, responseOwnerSettings(config)),
      outcomes: new EngineOutcomes(registry, (id) => this.health.probeSoon(id)),
      budgets: createBudgetStore(config, metrics, logger),
      sharedBindings,
      receipts: createTurnReceipts(config, {
        nowMs: () => clock.nowMs(),
        logger,
        health: metrics.bindingStore,
        settings: {
          get blockTokens() {
            return runtime.settings.config.affinity.receipts.block_tokens;
          },
        },
      }),
      classifier: undefined,
      settings: deriveSettings(config, registry.tiers()),
    };
    runtime.classifier = createClassifier(runtime);
    this.runtime = runtime;
    metrics.initTiers(registry.tiers());
    registry.onEjectionWithheld((backend, cause) => {
      metrics.ejectionWithheld(backend.id);
      logger.warn(
        { backend: backend.id, cause },
        "backend would be ejected but is the last available one of its tier: it keeps serving",
      );
    });

    registry.onHealthChange(({ backend, to, cause, ejectedUntilMs }) => {
      if (to === "down") {
        const breaking = scheduler.onBackendDown(backend.id, backend.tier);
        slots.rejectWaiters(backend.id, "backend marked down");
        const abandoned = attempts.abandon(backend.id, "backend marked down");
        if (ejectedUntilMs !== undefined) metrics.ejection(backend.id, cause);
        const ejectedForMs = ejectedUntilMs === undefined ? undefined : ejectedUntilMs - clock.nowMs();
        void breaking.then((broken) =>
          logger.warn(
            {
              backend: backend.id,
              cause,
              bindingsBroken: broken,
              attemptsAbandoned: abandoned,
              ejectedForMs,
            },
            ejectedUntilMs === undefined ? "backend down" : "backend ejected",
          ),
        );
      } else {
        void scheduler
          .onBackendUp(backend.id, registry.tier(backend.tier))
          .then((moved) =>
            logger.info({ backend: backend.id, cause, sessionsMovedBack: moved }, "backend up"),
          );
      }
    });

    this.discovery = new DnsDiscovery(config.discovery, {
      lookup: options.discoveryLookup ?? dnsLookup(config.health.probe_timeout_seconds * 1000),
      onChange: () => {
        const changed = this.applyBackends(this.runtime.settings.config);
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
      live: this.live,
      reload: () => this.reloadFromSource(),
    };
    const ownAdminPort = config.server.admin_port !== undefined;
    this.server = createGatewayServer(this.runtime, hooks, { api: true, admin: !ownAdminPort });
    this.adminServer = ownAdminPort
      ? createGatewayServer(this.runtime, hooks, { api: false, admin: true })
      : undefined;
    this.connections = new ConnectionGuard(this.server, maxConnectionsOf(config, this.fileLimit));
    this.server.on("request", (_req, res) => {
      this.activeRequests++;
      res.once("close", () => {
        if (--this.activeRequests === 0) this.onIdle?.();
      });
    });
    this.sweepTimer = setInterval(
      () => void this.bindingStore.sweep(clock.nowMs(), SWEEP_BATCH),
      SWEEP_INTERVAL_MS,
    );
    this.sweepTimer.unref();
  }

  static async start(config: GatewayConfig, options: GatewayOptions = {}): Promise<Gateway> {
    const gateway = new Gateway(config, options);
    await gateway.discovery.start();
    await gateway.waitForSharedStores();
    const at = options.listen ?? { host: config.server.host, port: config.server.port };
    await gateway.listen(at);
    if (gateway.adminServer !== undefined) {
      const admin = { host: config.server.admin_host ?? at.host, port: config.server.admin_port! };
      try {
        gateway.adminAddress = await listenOn(gateway.adminServer, admin);
      } catch (err) {
        await gateway.close(0);
        throw err;
      }
      gateway.runtime.logger.info({ url: gateway.adminUrl }, "admin API listening on its own port");
    }
    gateway.health.start();
    gateway.loadPoller.start();
    return gateway;
  }

  private async waitForSharedStores(): Promise<void> {
    const { sharedBindings, budgets, logger } = this.runtime;
    const [bindingsUp, budgetsUp] = await Promise.all([
      sharedBindings?.connected(SHARED_STORE_STARTUP_WAIT_MS) ?? true,
      budgets.connected(SHARED_STORE_STARTUP_WAIT_MS),
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
    if (this.address === undefined) throw new Error("gateway is not listening");
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

  private async listen(at: { host: string; port: number }): Promise<void> {
    this.address = await listenOn(this.server, at);
  }

  /** Applies a new config: backends added/updated/removed, affinity, health, admission, routing settings. */
  reload(config: GatewayConfig): { changed: string[] } {
    checkEnvironment(config, "reloaded config");
    const rt = this.runtime;
    const before = rt.settings.config;
    const sections = (Object.keys(config) as (keyof GatewayConfig)[]).filter(
      (key) => JSON.stringify(before[key]) !== JSON.stringify(config[key]),
    );
    if (sections.length === 0) {
      rt.logger.info({ changed: [] }, "config reloaded: no change");
      return { changed: [] };
    }
    const changed = this.applyBackends(config);
    void this.discovery.configure(config.discovery);
    rt.scheduler.configure({
      stickyTtlSeconds: config.affinity.sticky_ttl_seconds,
      rebalanceOnRecovery: config.affinity.rebalance_on_backend_recovery,
      balancer: createBalancer(config.affinity.balancer, this.random),
      loadFactor: config.affinity.load_factor,
      sessionless: config.affinity.sessionless,
      policy: createPolicy(config.affinity, this.random, engineSignalMaxAgeMs(config)),
    });
    rt.sharedBindings?.configure(config.affinity.sticky_ttl_seconds * 1000);
    rt.slots.configure(queueSettingsOf(config));
    rt.slots.service.configure(attainedServiceSettingsOf(config));
    rt.metrics.flows.attach(rt.slots, config.admission.scheduling.metrics_top_flows);
    this.health.configure({
      intervalMs: config.health.probe_interval_seconds * 1000,
      timeoutMs: config.health.probe_timeout_seconds * 1000,
    });
    this.loadPoller.configure(loadPollSettings(config));
    rt.responseOwners.configure(responseOwnerSettings(config));
    const budgets = budgetSettings(config);
    const previousStores = rt.settings.config;
    if (
      JSON.stringify(previousStores.admission.store) !== JSON.stringify(config.admission.store) ||
      JSON.stringify(previousStores.affinity.store) !== JSON.stringify(config.affinity.store)
    ) {
      changed.push("affinity.store/admission.store changed: takes effect at the next restart");
    }
    if (rt.budgets.accepts(budgets)) {
      rt.budgets.configure(budgets);
    } else if (previousStores.admission.store.kind === "memory") {
      rt.budgets = new TokenBudgets(budgets);
      changed.push("budget window or max_agents changed: budget usage starts afresh");
    } else {
      rt.budgets.configure(budgets);
      changed.push("budget window changed: shared usage is read in the new window's buckets");
    }
    for (const backend of rt.registry.all()) rt.slots.pump(backend);
    this.connections.setLimit(maxConnectionsOf(config, this.fileLimit));
    rt.metrics.initTiers(rt.registry.tiers());
    const previous = rt.settings.config;
    if (
      previous.server.admin_port !== config.server.admin_port ||
      previous.server.admin_host !== config.server.admin_host
    ) {
      changed.push("server.admin_port/admin_host changed: takes effect at the next restart");
    }
    if (previous.server.host !== config.server.host || previous.server.port !== config.server.port) {
      changed.push("server.host/port changed: takes effect at the next restart");
    }
    // Node reads these per connection check, so new values apply to the requests being received too.
    const timeouts = clientTimeoutsMs(config.server);
    this.server.headersTimeout = timeouts.headersMs;
    this.server.requestTimeout = timeouts.receiveMs;
    rt.settings = deriveSettings(config, rt.registry.tiers());
    // A fresh verdict cache: a reload may change the tiers, the model asked or its prompt.
    rt.classifier = createClassifier(rt);
    changed.push(`changed: ${sections.join(", ")}`);
    rt.logger.info({ changed }, "config reloaded");
    return { changed };
  }

  /**
   * Makes the registry hold the config's static backends plus the discovered ones. A backend that left
   * (the file, or DNS) is handled like an engine going down; one that arrived takes traffic only after its
   * first probe succeeds (the registry keeps it down until then).
   */
  private applyBackends(config: GatewayConfig): string[] {
    const rt = this.runtime;
    const changed: string[] = [];
    const ids = new Set(config.backends.map((b) => b.id));
    const discovered = this.discovery.backends().filter((b) => !ids.has(b.id));
    const wanted: BackendConfig[] = [...config.backends, ...discovered];
    const removed = rt.registry.reconfigure(wanted, thresholdsOf(config));
    for (const backend of removed) {
      const reason = this.discoveredIds.has(backend.id)
        ? "backend left discovery"
        : "backend removed from config";
      const held = rt.scheduler.bindingsOf(backend.id);
      void rt.scheduler.onBackendDown(backend.id, backend.tier);
      rt.slots.rejectWaiters(backend.id, reason);
      rt.attempts.abandon(backend.id, reason);
      rt.pools.drop(backend.id);
      changed.push(`removed backend ${backend.id} (its ${held} bindings broken)`);
    }
    this.health.configure({
      intervalMs: config.health.probe_interval_seconds * 1000,
      timeoutMs: config.health.probe_timeout_seconds * 1000,
    });
    this.discoveredIds = new Set(discovered.map((b) => b.id));
    for (const backend of rt.registry.all()) rt.slots.pump(backend);
    rt.metrics.initTiers(rt.registry.tiers());
    rt.settings = deriveSettings(rt.settings.config, rt.registry.tiers());
    return changed;
  }

  private async reloadFromSource(): Promise<{ changed: string[] }> {
    if (this.options.loadConfig === undefined)
      throw new Error("this gateway was started without a config file");
    return this.reload(await this.options.loadConfig());
  }

  /** Re-reads the config file (SIGHUP); a bad file is reported and the running config stays. */
  async reloadOrReport(): Promise<void> {
    try {
      await this.reloadFromSource();
    } catch (err) {
      this.runtime.logger.error(
        { err: err instanceof Error ? err.message : String(err) },
        "config reload refused",
      );
    }
  }

  /**
   * Stops accepting, lets in-flight requests finish for up to `graceMs`, then closes what is left and
   * releases every timer and connection.
   */
  async close(graceMs = this.runtime.settings.config.server.shutdown_grace_seconds * 1000): Promise<void> {
    this.accepting = false;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    const adminClosed = new Promise<void>((resolve) =>
      this.adminServer === undefined ? resolve() : this.adminServer.close(() => resolve()),
    );
    this.adminServer?.closeAllConnections();
    if (this.activeRequests > 0) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.onIdle = resolve;
        timer = setTimeout(resolve, graceMs);
      });
      clearTimeout(timer);
      this.onIdle = undefined;
    }
    if (this.activeRequests > 0) {
      // The grace is over: each request still running ends as a failure would end it (a stream gets an SSE
      // error event and [DONE]), then what is left is closed.
      const reason = new GatewayError(
        "shutting_down",
        "the gateway shut down before the answer was complete",
      );
      for (const ctx of [...this.live]) cancelRequest(ctx, reason);
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.onIdle = resolve;
        timer = setTimeout(resolve, SHUTDOWN_FLUSH_MS);
      });
      clearTimeout(timer);
      this.onIdle = undefined;
    }
    this.server.closeAllConnections();
    clearInterval(this.sweepTimer);
    this.discovery.stop();
    await this.health.stop();
    await this.loadPoller.stop();
    await this.runtime.pools.close();
    await this.runtime.sharedBindings?.flush();
    await this.runtime.sharedBindings?.close();
    await this.runtime.budgets.flush();
    await this.runtime.budgets.close();
    await this.runtime.receipts.memory.flush();
    await this.runtime.receipts.memory.close();
    await this.sharedService?.close();
    await closed;
    await adminClosed;
  }
}
