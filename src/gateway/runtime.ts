// A running gateway's parts: services built once at start, and the live snapshot (settings and what is built
// from them) that a reload swaps whole. Handlers name the parts they use (Pick<GatewayParts, ...>).
import type { KvCacheView } from "../kv-events/kv-cache-view.js";
import type { Logger } from "pino";
import type { ResponseOwnerStore } from "../affinity/response-owner-store.js";
import type { PlacementService } from "../affinity/placement-service.js";
import type { BackendSlots } from "../admission/backend-slots.js";
import type { BudgetStore } from "../admission/budget-store.js";
import type { BindingStore } from "../affinity/binding-store.js";
import type { BackendRegistry } from "../backends/registry.js";
import type { Clock, Timers } from "../core/clock.js";
import type { GatewayMetrics } from "../metrics/gateway-metrics.js";
import type { TurnReceipts } from "../receipts/turn-receipts.js";
import type { TierClassifier } from "../routing/tier-classifier.js";
import type { RequestTracer } from "../tracing/request-tracer.js";
import type { AttemptEnv } from "./attempt.js";
import type { AttemptTracker } from "./attempt-tracker.js";
import type { AttemptRecorder } from "./attempt-loop.js";
import type { EngineOutcomes } from "./engine-outcomes.js";
import type { GatewaySettings } from "./settings.js";
import type { UpstreamPools } from "./upstream-pools.js";

/**
 * What one request reads once, at its start, and keeps to its end: a reload swaps the whole snapshot, so a
 * request never sees half of one config and half of the next.
 */
export interface LiveState {
  readonly settings: GatewaySettings;
  /** The token budgets (a reload that changes a memory store's window starts a fresh one). */
  readonly budgets: BudgetStore;
  /** The LLM tier classifier, when routing.classifier.enabled (a fresh verdict cache per config). */
  readonly classifier: TierClassifier | undefined;
  /** What one attempt needs of the gateway, with this snapshot's timeouts. */
  readonly attemptEnv: AttemptEnv;
}

/** The current live snapshot; only the gateway's reload replaces it. */
export interface LiveCell {
  readonly current: LiveState;
}

/** The services of a running gateway: each built once, none replaced by a reload (they are configured). */
export interface GatewayParts {
  readonly clock: Clock;
  /**
   * Where the request path schedules: the request deadline, an attempt's first-byte, headers and stall timers,
   * queue timeouts, the classifier's and the owner search's timeouts (the manual clock's in tests).
   */
  readonly timers: Timers;
  readonly logger: Logger;
  /** One span per request when server.tracing is on (restart-only); undefined when it is off. */
  readonly tracer: RequestTracer | undefined;
  readonly registry: BackendRegistry;
  /** The placement service (affinity/placement-service.ts): binding lookups, placements, their effects. */
  readonly scheduler: PlacementService;
  readonly slots: BackendSlots;
  readonly pools: UpstreamPools;
  readonly metrics: GatewayMetrics;
  readonly attempts: AttemptTracker;
  /** The Responses API: which engine stores each response. */
  readonly responseOwners: ResponseOwnerStore;
  /** Where real requests' outcomes feed the engines' health. */
  readonly outcomes: EngineOutcomes;
  /** What the attempt loop records: metrics and the outcomes above. */
  readonly recorder: AttemptRecorder;
  /** The binding store (memory, or shared through Redis with affinity.store kind redis): swept, flushed, closed. */
  readonly bindings: BindingStore;
  /** Route receipts: each session's last turn, and the receipt of the next (src/receipts). */
  readonly receipts: TurnReceipts;
  /** What engines publishing KV events hold (src/kv-events). */
  readonly kvCache?: KvCacheView;
  readonly live: LiveCell;
}
