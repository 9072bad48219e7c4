// Builds a gateway's services from its first settings snapshot: registry, stores, scheduler, slots, pools, metrics.
import { createKvCacheView, kvEventsBackendsOf } from "../kv-events/gateway-hooks.js";
import { shareKvPendingOverRedis } from "../kv-events/redis-pending-share.js";
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
import { createResponseOwnerStore } from "../affinity/redis-response-owners.js";
import { PlacementService, type SchedulerSettings } from "../affinity/placement-service.js";
import { StickyTable } from "../affinity/sticky-table.js";
import { missingApiKeyEnv } from "../backends/backend.js";
import { EngineLoadPoller } from "../backends/engine-load-poller.js";
import { HealthChecker } from "../backends/health-checker.js";
import { BackendRegistry } from "../backends/registry.js";
import { ConfigError } from "../config/load.js";
import type { GatewayConfig } from "../config/schema.js";
import type { Clock, Timers } from "../core/clock.js";
import type { Random } from "../core/random.js";
import { GatewayMetrics } from "../metrics/gateway-metrics.js";
import { redisConnection, redisEnvProblems } from "../store/redis-connection.js";
import { StoreOutageLog } from "../store/outage-log.js";
import { RedisLink, type RedisLinkOptions } from "../store/redis-link.js";
import { RedisSubscription } from "../store/redis-subscription.js";
import { AttemptTracker } from "./attempt-tracker.js";
import { attemptRecorder } from "./attempt-loop.js";
import { EngineOutcomes } from "./engine-outcomes.js";
import type { GatewayParts, LiveCell, LiveState } from "./runtime.js";
import { settingsFrom, type GatewaySettings } from "./settings.js";
import { SearchingOwnerStore } from "./owner-search.js";
import { UpstreamPools } from "./upstream-pools.js";
import { createRequestTracer } from "../tracing/request-tracer.js";

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
  const { scheduler } = settings;
  return {
    stickyTtlMs: scheduler.stickyTtlMs,
    rebalanceOnRecovery: scheduler.rebalanceOnRecovery,
    loadFactor: scheduler.loadFactor,
    sessionless: scheduler.sessionless,
    engineSignalMaxAgeMs: scheduler.engineSignalMaxAgeMs,
    balancer: createBalancer(scheduler.balancer, random),
    policy: createPolicy(scheduler.policy, random, scheduler.engineSignalMaxAgeMs),
    kvMoveMinTokens: scheduler.kvMoveMinTokens,
    kvPrefillContextWeight: scheduler.kvPrefillContextWeight,
  };
}

/** The budget store the config names: this process's own, or the replicas' shared one in Redis. */
export function createBudgetStore(
  settings: GatewaySettings,
  metrics: GatewayMetrics,
  logger: RedisLinkOptions["logger"],
): BudgetStore {
  const store = settings.stores.budgets;
  if (store.kind === "memory") return new TokenBudgets(settings.budgets);
  return new RedisBudgetStore(settings.budgets, {
    keyPrefix: store.key_prefix,
    link: { ...redisConnection(store), timeoutMs: store.timeout_ms, logger, health: metrics.budgetStore },
  });
}

export interface WiringOptions {
  clock: Clock;
  /** Where the request path's timers, probes and shared-service syncs are scheduled (the clock's own in tests). */
  timers: Timers;
  /** Background loops' timers (engine readings): the system's unref'd ones by default. */
  backgroundTimers: Timers;
  random: Random;
  logger: Logger;
  /** The sticky table's secret hash key (two 32-bit words). */
  bindingHashKey: readonly [number, number];
  /** Asks the health checker for an early probe of one backend (the checker is built after the parts). */
  probeSoon: (backendId: string) => void;
  /** The live snapshot's receipt block size (read per turn, so a reload applies at once). */
  receiptBlockTokens: () => number;
  /** The live snapshot (built from the parts, so read only once requests run: the owner search's attempts). */
  live: () => LiveState;
}

export interface Wired {
  readonly parts: Omit<GatewayParts, "live">;
  /** The first snapshot's settings (its tiers are the registry's). */
  readonly settings: GatewaySettings;
  readonly budgets: BudgetStore;
  /** The flows' attained service shared through admission.store when it is Redis (closed at shutdown). */
  readonly sharedService: RedisAttainedService | undefined;
  readonly health: HealthChecker;
  readonly loadPoller: EngineLoadPoller;
}

/** The services of a gateway started with `config` (checked already). Connects nothing yet but Redis links. */
export function wireGateway(config: GatewayConfig, options: WiringOptions): Wired {
  const { clock, random, logger } = options;
  // Every Redis link of this gateway logs through it: one line per outage of the server they share.
  const storeLog = new StoreOutageLog(logger);
  const settings = settingsFrom(config);
  const registry = new BackendRegistry(settings.backends, settings.thresholds, clock);
  const slots = new BackendSlots(
    settings.queue,
    new AttainedService(settings.attainedService, clock),
    options.timers,
  );
  const table = new StickyTable(settings.maxBindings, options.bindingHashKey);
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
  metrics.flows.attach(slots, settings.metricsTopFlows);
  const sharedService = sharedAttainedService(config, slots.service, {
    clock,
    timers: options.timers,
    logger: storeLog,
    // The budgets' store is the same Redis: its errors count there; its up gauge stays the budgets' link's.
    health: { up: () => undefined, error: () => metrics.budgetStore.error() },
  });
  const bindings = createBindingStore(settings, { table, metrics, logger: storeLog });
  const kvCache = createKvCacheView(config, logger, clock, options.timers, randomBytes(8).toString("hex"));
  kvCache.configure(kvEventsBackendsOf(config.backends));
  const bindingStore = settings.stores.bindings;
  // Replicas sharing bindings in Redis also tell each other their sends to engines with KV events.
  if (bindingStore.kind === "redis")
    shareKvPendingOverRedis(kvCache, bindingStore, {
      logger: storeLog,
      // Its errors count as the binding store's; the store's up gauge stays its own link's.
      health: { up: () => undefined, error: () => metrics.bindingStore.error() },
      onInvalid: (err) =>
        logger.warn(
          { err: err instanceof Error ? err.message : String(err) },
          "KV events: skipped a malformed shared pending-send message",
        ),
    });
  const scheduler = new PlacementService({
    ...schedulerSettingsOf(settings, random),
    store: bindings,
    clock,
    recorder: metrics,
    kvCache,
  });
  const pools = new UpstreamPools(settings.pools);
  const outcomes = new EngineOutcomes(registry, options.probeSoon);
  const parts = {
    clock,
    timers: options.timers,
    logger,
    tracer: createRequestTracer(settings.tracing, logger, options.backgroundTimers),
    registry,
    scheduler,
    slots,
    pools,
    metrics,
    attempts: new AttemptTracker(),
    // A miss of the owner store asks the engines (owner-search.ts), bounded by the live probe timeout.
    responseOwners: new SearchingOwnerStore(
      createResponseOwnerStore(config, settings.responseOwners, {
        clock,
        logger: storeLog,
        health: metrics.bindingStore,
      }),
      {
        registry,
        pools,
        attemptEnv: () => options.live().attemptEnv,
        timeoutMs: () => options.live().settings.probe.timeoutMs,
        timers: options.timers,
      },
    ),
    outcomes,
    recorder: attemptRecorder(metrics, outcomes),
    bindings,
    kvCache,
    receipts: createTurnReceipts(config, {
      nowMs: () => clock.nowMs(),
      logger: storeLog,
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
    budgets: createBudgetStore(settings, metrics, storeLog),
    sharedService,
    health: new HealthChecker(registry, settings.probe, clock, options.timers),
    loadPoller: new EngineLoadPoller(registry, clock, settings.loadPoll, options.backgroundTimers),
  };
}

/** The binding store the config names: the table alone, or Redis with the table as this process's local view. */
function createBindingStore(
  settings: GatewaySettings,
  deps: { table: StickyTable; metrics: GatewayMetrics; logger: RedisLinkOptions["logger"] },
): BindingStore {
  const storeConfig = settings.stores.bindings;
  if (storeConfig.kind !== "redis") return new MemoryBindingStore(deps.table);
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
  const { stickyTtlMs } = settings.scheduler;
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
