// The live parts of a running gateway, as the request handlers see them (built and rewired by gateway.ts).
import type { Logger } from "pino";
import type { ResponseOwners } from "../affinity/response-owners.js";
import type { PlacementService } from "../affinity/placement-service.js";
import type { BackendSlots } from "../admission/backend-slots.js";
import type { BudgetStore } from "../admission/budget-store.js";
import type { RedisBindingStore } from "../affinity/redis-binding-store.js";
import type { BackendRegistry } from "../backends/registry.js";
import type { Clock } from "../core/clock.js";
import type { GatewayConfig } from "../config/schema.js";
import type { GatewayMetrics } from "../metrics/gateway-metrics.js";
import type { TurnReceipts } from "../receipts/turn-receipts.js";
import type { TierClassifier } from "../routing/tier-classifier.js";
import type { TierRouterSettings } from "../routing/tier-router.js";
import type { AdaptationSettings } from "./adaptation/responses-tools.js";
import type { AttemptEnv } from "./attempt.js";
import type { AttemptTracker } from "./attempt-tracker.js";
import type { ApiKeyEntry } from "./client-auth.js";
import type { EngineOutcomes } from "./engine-outcomes.js";
import type { UpstreamPools } from "./upstream-pools.js";

/** Settings derived once per config (load or reload), in the units the request path uses. */
export interface RuntimeSettings {
  config: GatewayConfig;
  tiers: TierRouterSettings;
  maxBodyBytes: number;
  maxAttempts: number;
  firstByteTimeoutMs: number;
  /** The first-byte timeout of streaming requests (their first chunk comes after prefill only). */
  streamFirstByteTimeoutMs: number;
  /** A streaming attempt without response headers after this long fails over (upstream.stream_headers_timeout_seconds). */
  streamHeadersTimeoutMs: number;
  /** A non-streaming answer is refused past this many bytes. */
  maxResponseBytes: number;
  requestTimeoutMs: number;
  adminToken: string | undefined;
  /** Client API keys by the hex SHA-256 of the key. */
  apiKeys: ReadonlyMap<string, ApiKeyEntry>;
  /** What the gateway changes in requests a stock engine would refuse (config `adaptation`). */
  adaptation: AdaptationSettings;
}

export interface GatewayRuntime {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly registry: BackendRegistry;
  readonly scheduler: PlacementService;
  readonly slots: BackendSlots;
  readonly pools: UpstreamPools;
  readonly metrics: GatewayMetrics;
  readonly attempts: AttemptTracker;
  /** What one attempt needs of the gateway (reads the current settings, so a reload reaches it). */
  readonly attemptEnv: AttemptEnv;
  /** The Responses API: which engine stores each response. */
  readonly responseOwners: ResponseOwners;
  /** Where real requests' outcomes feed the engines' health. */
  readonly outcomes: EngineOutcomes;
  budgets: BudgetStore;
  /** Set when bindings are shared (affinity.store kind redis): its link's health, flush and close. */
  readonly sharedBindings: RedisBindingStore | undefined;
  /** Route receipts: each session's last turn, and the receipt of the next (src/receipts). */
  readonly receipts: TurnReceipts;
  /** The LLM tier classifier, when routing.classifier.enabled. */
  classifier: TierClassifier | undefined;
  settings: RuntimeSettings;
}
