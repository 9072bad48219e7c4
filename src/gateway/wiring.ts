// Builds a gateway's services from its first settings snapshot: registry, stores, scheduler, slots, pools, metrics.
import { createKvCacheView, kvEventsBackendsOf } from "../kv-events/gateway-hooks.js";
import { randomBytes } from "node:crypto";
import type { Logger } from "pino";
import { BackendSlots } from "../admission/backend-slots.js";
import { AttainedService } from "../admission/flow-queue/attained-service.js";
import {
  RedisAttainedService,
  sharedAttainedService,
} from "../admission/flow-queue/redis-attained-service.js";
import type { BudgetStore } from "../admission/budget-store.js";
import { RedisBudgetStore } from "../admission/redis-budget-store.js";
import { TokenBudgets } from "../admission/token-budgets.js";
import { createTurnReceipts } from "../receipts/create-receipts.js";
import { createBalancer } from "../affinity/balancers.js";
import { createPolicy } from "../affinity/policies/create-policy.js";
import { BINDING_SCRIPTS, RedisBindings } from "../affinity/redis-bindings.js";
import { RedisBindingStore } from "../affinity/redis-binding-store.js";
import { MemoryBindingStore } from "../affinity/memory-bindings.js";
import type { BindingStore } from "../affinity/binding-store.js";
import { ResponseOwners } from "../affinity/response-owners.js";
import { PlacementService, type SchedulerSettings } from "../affinity/placement-service.js";
import { StickyTable } from "../affinity/sticky-table.js";
import { missingApiKeyEnv } from "../backends/backend.js";
import { EngineLoadPoller } from "../backends/engine-load-poller.js";
import { HealthChecker } from "../backends/health-checker.js";
import { BackendRegistry } from "../backends/registry.js";
import { ConfigError } from "../config/load.js";
import type { GatewayConfig } from "../config/schema.js";
import { systemTimers, type Clock } from "../core/clock.js";
import type { Random } from "../core/random.js";
import { GatewayMetrics } from "../metrics/gateway-metrics.js";
import { redisConnection, redisEnvProblems } from "../store/redis-connection.js";
import { RedisLink } from "../store/redis-link.js";
import { RedisSubscription } from "../store/redis-subscription.js";
import { AttemptTracker } from "./attempt-tracker.js";
import { EngineOutcomes } from "./engine-outcomes.js";
import type { GatewayParts, LiveCell } from "./runtime.js";
import { settingsFrom, type GatewaySettings } from "./settings.js";
import { UpstreamPools } from "./upstream-pools.js";

/** Unpredictable to clients, so they cannot craft session ids that collide in the table's index. */
export function randomHashKey(): [number, number] {
  const bytes = randomBytes(8);
  return [bytes.readInt32LE(0), bytes.readInt32LE(4)];
}

/** Refuses a config whose backends or stores name environment variables (or files) that are not there. */
export function checkEnvironment(config: GatewayConfig, source: string): void {
  const problems = missingApiKeyEnv(config.backends);
  if (config.affinity.store.kind === "redis")
    problems.push(...redisEnvProblems(config.affinity.store, "affinity.store"));
  if (config.admission.store.kind === "redis")
    problems.push(...redisEnvProblems(config.admission.store, "admission.store"));
  if (problems.length > 0) throw new ConfigError(source, problems);
}

/** The scheduler's settings of a snapshot: its data, and the balancer and policy the config names. */
export function schedulerSettingsOf(settings: GatewaySettings, random: Random): SchedulerSettings {
  const { affinity } = settings.config;
  return {
    ...settings.scheduler,
    balancer: createBalancer(affinity.balancer, random),
    policy: createPolicy(affinity, random, settings.scheduler.engineSignalMaxAgeMs),
    kvMoveMinTokens: affinity.kv_events.move_min_tokens,
  };
}

/** The budget store the config names: this process's own, or the replicas' shared one in Redis. */
export function createBudgetStore(
  settings: GatewaySettings,
  metrics: GatewayMetrics,
  logger: Logger,
): BudgetStore {
  const store = settings.config.admission.store;
  if (store.kind === "memory") return new TokenBudgets(settings.budgets);
  return new RedisBudgetStore(settings.budgets, {
    keyPrefix: store.key_prefix,
    link: { ...redisConnection(store), timeoutMs: store.timeout_ms, logger, health: metrics.budgetStore },
  });
}

export interface WiringOptions {
  clock: Clock;
  random: Random;
  logger: Logger;
  /** The sticky table's secret hash key (two 32-bit words). */
  bindingHashKey: readonly [number, number];
  /** Asks the health checker for an early probe of one backend (the checker is built after the parts). */
  probeSoon: (backendId: string) => void;
  /** The live snapshot's receipt block size (read per turn, so a reload applies at once). */
  receiptBlockTokens: () => number;
}

export interface Wired {
  readonly parts: Omit<GatewayParts, "live">;
  /** The first snapshot's settings (its tiers are the registry's). */
  readonly settings: GatewaySettings;
  readonly budgets: BudgetStore;
  /** The binding store (swept in the background). */
  readonly bindingStore: BindingStore;
  /** The flows' attained service shared through admission.store when it is Redis (closed at shutdown). */
  readonly sharedService: RedisAttainedService | undefined;
  readonly health: HealthChecker;
  readonly loadPoller: EngineLoadPoller;
}

/** The services of a gateway started with `config` (checked already). Connects nothing yet but Redis links. */
export function wireGateway(config: GatewayConfig, options: WiringOptions): Wired {
  const { clock, random, logger } = options;
  // The tiers the router's defaults depend on are the registry's, which the config's thresholds build.
  const initial = settingsFrom(config, []);
  const registry = new BackendRegistry(config.backends, initial.thresholds, clock);
  const settings = settingsFrom(config, registry.tiers());
  const slots = new BackendSlots(settings.queue, new AttainedService(settings.attainedService, clock));
  const table = new StickyTable(config.affinity.max_bindings, options.bindingHashKey);
  const metrics = new GatewayMetrics({
    backends: () =>
      [...registry.all()].map((b) => ({
        id: b.id,
        tier: b.tier,
        up: b.state !== "down",
        inflight: b.inflight,
        bindings: table.countFor(b.id),
        engineLoad: b.engineLoad,
      })),
    queueDepth: () => slots.depth,
  });
  metrics.flows.attach(slots, config.admission.scheduling.metrics_top_flows);
  const sharedService = sharedAttainedService(config, slots.service, {
    clock,
    timers: systemTimers,
    logger,
    // The budgets' store is the same Redis: its errors count there; its up gauge stays the budgets' link's.
    health: { up: () => undefined, error: () => metrics.budgetStore.error() },
  });
  const sharedBindings = createSharedBindings(config, { table, metrics, logger });
  const bindingStore: BindingStore = sharedBindings ?? new MemoryBindingStore(table);
  const kvCache = createKvCacheView(config, logger);
  kvCache.configure(kvEventsBackendsOf(config.backends));
  const scheduler = new PlacementService({
    ...schedulerSettingsOf(settings, random),
    store: bindingStore,
    clock,
    recorder: metrics,
    kvCache,
  });
  const pools = new UpstreamPools(settings.pools);
  const parts = {
    clock,
    logger,
    registry,
    scheduler,
    slots,
    pools,
    metrics,
    attempts: new AttemptTracker(),
    responseOwners: new ResponseOwners(clock, settings.responseOwners),
    outcomes: new EngineOutcomes(registry, options.probeSoon),
    sharedBindings,
    kvCache,
    receipts: createTurnReceipts(config, {
      nowMs: () => clock.nowMs(),
      logger,
      health: metrics.bindingStore,
      settings: {
        get blockTokens() {
          return options.receiptBlockTokens();
        },
      },
    }),
  };
  metrics.initTiers(registry.tiers());
  return {
    parts,
    settings,
    budgets: createBudgetStore(settings, metrics, logger),
    bindingStore,
    sharedService,
    health: new HealthChecker(registry, settings.probe),
    loadPoller: new EngineLoadPoller(registry, clock, settings.loadPoll),
  };
}

/** With affinity.store kind redis: the binding store in Redis, this process's table its local view. */
function createSharedBindings(
  config: GatewayConfig,
  deps: { table: StickyTable; metrics: GatewayMetrics; logger: Logger },
): RedisBindingStore | undefined {
  const storeConfig = config.affinity.store;
  if (storeConfig.kind !== "redis") return undefined;
  const { table, metrics, logger } = deps;
  const connection = redisConnection(storeConfig);
  const link = new RedisLink({
    ...connection,
    timeoutMs: storeConfig.timeout_ms,
    name: "bindings",
    scripts: BINDING_SCRIPTS,
    logger,
    health: metrics.bindingStore,
  });
  const stickyTtlMs = config.affinity.sticky_ttl_seconds * 1000;
  const remote = new RedisBindings(link, storeConfig.key_prefix, stickyTtlMs);
  const replicated = new RedisBindingStore({ local: table, remote, stickyTtlMs });
  replicated.useInvalidations(
    new RedisSubscription(
      connection.url,
      remote.invalidationChannel,
      (message) => replicated.invalidate(message),
      () => replicated.forgetConfirmed(),
      connection.tls,
    ),
  );
  return replicated;
}

export type { LiveCell };
