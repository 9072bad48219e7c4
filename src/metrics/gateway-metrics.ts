// Every Prometheus metric of the gateway, declared once, in a registry of its own (no global state).
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { LOST_CAUSES } from "../receipts/receipt-rules.js";
import type { AffinityRecorder } from "../affinity/placement-service.js";
import type { EngineLoad } from "../backends/engine-load.js";
import type { StoreHealthSink } from "../store/redis-link.js";
import { FlowMetrics } from "./flow-metrics.js";
import { HotHistogram } from "./hot-histogram.js";
import { processMetrics } from "./process-metrics.js";

/** Values read at scrape time, so the request path does not keep gauges up to date. */
export interface BackendSnapshot {
  id: string;
  tier: string;
  up: boolean;
  inflight: number;
  bindings: number;
  engineLoad: EngineLoad | undefined;
}

export interface GaugeSource {
  backends(): Iterable<BackendSnapshot>;
  queueDepth(): number;
}

/** Refusal reasons that exist from the start (others appear with their first event). */
const KNOWN_REFUSALS = [
  "budget_exceeded",
  "queue_full",
  "queue_timeout",
  "no_healthy_backend",
  "unauthorized",
];

const CLASSIFIER_OUTCOMES = ["answered", "cached", "timeout", "error", "unparseable"];

const LATENCY_BUCKETS_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160];

/** A label value as the request path has it (a status code stays a number until scrape time). */
type LabelValue = string | number;

/** One label set's count, kept and bumped without a lookup. */
interface HotCount {
  labels: Record<string, string>;
  value: number;
}

/**
 * Counters bumped on every request are kept as plain numbers per label set and handed to prom-client only
 * at scrape time: prom-client hashes the label values on every inc(), which costs more than the rest of
 * the bookkeeping of a request. A label set's count is found through nested maps keyed by its values as they
 * are (a tier, a backend id, a status code): no key string is built and hashed per call, no closure made.
 */
class HotCounter<L extends string> {
  private readonly counts: HotCount[] = [];
  private readonly root = new Map<LabelValue, unknown>();

  constructor(
    registry: Registry,
    name: string,
    help: string,
    private readonly labelNames: readonly L[],
  ) {
    const counts = this.counts;
    new Counter({
      name,
      help,
      labelNames,
      registers: [registry],
      collect() {
        this.reset();
        for (const { labels, value } of counts) this.inc(labels as Partial<Record<L, string>>, value);
      },
    });
  }

  /** Adds to the count of the label set whose values are given in labelNames' order. */
  add(amount: number, a: LabelValue, b: LabelValue = "", c: LabelValue = ""): void {
    this.count(a, b, c).value += amount;
  }

  /** The count of one label set (values in labelNames' order), made at 0 on first use. */
  count(a: LabelValue, b: LabelValue = "", c: LabelValue = ""): HotCount {
    const depth = this.labelNames.length;
    let map = this.root;
    if (depth > 1) map = this.branch(map, a);
    if (depth > 2) map = this.branch(map, b);
    const last = depth === 1 ? a : depth === 2 ? b : c;
    let count = map.get(last) as HotCount | undefined;
    if (count === undefined) {
      const values = [a, b, c];
      const labels: Record<string, string> = {};
      this.labelNames.forEach((name, i) => (labels[name] = String(values[i])));
      count = { labels, value: 0 };
      this.counts.push(count);
      map.set(last, count);
    }
    return count;
  }

  private branch(map: Map<LabelValue, unknown>, value: LabelValue): Map<LabelValue, unknown> {
    let next = map.get(value) as Map<LabelValue, unknown> | undefined;
    if (next === undefined) map.set(value, (next = new Map()));
    return next;
  }
}

export class GatewayMetrics implements AffinityRecorder {
  readonly registry = new Registry();
  /** The flow scheduler's: per band, per flow, fairness. */
  readonly flows = new FlowMetrics(this.registry);

  private readonly affinityHits = new HotCounter(
    this.registry,
    "agentserve_affinity_hits_total",
    "Requests that reused the session's existing backend binding",
    ["tier"],
  );
  private readonly affinityMisses = new HotCounter(
    this.registry,
    "agentserve_affinity_misses_total",
    "Requests that needed a new binding (first turn, expired, rebind, affinity off, no session) or spilled",
    ["tier"],
  );
  private readonly affinitySpills = new Counter({
    name: "agentserve_affinity_spills_total",
    help: "Requests of bound sessions sent past their pinned backend because it had no free slot (binding kept)",
    labelNames: ["tier"] as const,
    registers: [this.registry],
  });
  private readonly affinityBroken = new Counter({
    name: "agentserve_affinity_broken_total",
    help: "Bindings invalidated because the pinned backend went down or failed a request",
    labelNames: ["tier"] as const,
    registers: [this.registry],
  });
  private readonly requests = new HotCounter(
    this.registry,
    "agentserve_requests_total",
    "Requests answered, by tier, final backend and HTTP status",
    ["tier", "backend", "status"],
  );
  private readonly selections = new HotCounter(
    this.registry,
    "agentserve_selections_total",
    "Backend selections by reason (affinity_hit, new_session, rebind_*, failover, spill, prefix, ...)",
    ["tier", "reason"],
  );
  private readonly tokenCounts = new HotCounter(
    this.registry,
    "agentserve_tokens_total",
    "Tokens the engines reported in usage: prompt, of which cached (prefix-cache hits), and completion",
    ["tier", "kind"],
  );
  private readonly prefixTokens = new HotCounter(
    this.registry,
    "agentserve_prefix_tokens_total",
    "Route receipts: prompt tokens a turn could reuse from its previous turn, the engine's cached ones, and the lost ones, by cause",
    ["tier", "kind", "cause"],
  );
  /** The three counts of each tier and cause (by tier, then cause), so that a receipt bumps them after one lookup. */
  private readonly prefixTokenCounts = new Map<
    string,
    Map<string, { reusable: HotCount; cached: HotCount; lost: HotCount }>
  >();
  private readonly bindingStoreUp = new Gauge({
    name: "agentserve_binding_store_up",
    help: "1 while the binding store answers (always 1 for the memory store); 0: this replica decides alone",
    registers: [this.registry],
  });
  private readonly bindingStoreErrors = new Counter({
    name: "agentserve_binding_store_errors_total",
    help: "Binding store calls that failed or passed timeout_ms (each one decided locally instead)",
    registers: [this.registry],
  });
  private readonly budgetStoreUp = new Gauge({
    name: "agentserve_budget_store_up",
    help: "1 while the budget store answers (always 1 for the memory store); 0: budgets counted locally",
    registers: [this.registry],
  });
  private readonly budgetStoreErrors = new Counter({
    name: "agentserve_budget_store_errors_total",
    help: "Budget store calls that failed or passed timeout_ms (each one decided locally instead)",
    registers: [this.registry],
  });
  /** Where the binding store's link reports its health. */
  readonly bindingStore: StoreHealthSink = {
    up: (up) => this.bindingStoreUp.set(up ? 1 : 0),
    error: () => this.bindingStoreErrors.inc(),
  };
  /** Where the budget store's link reports its health. */
  readonly budgetStore: StoreHealthSink = {
    up: (up) => this.budgetStoreUp.set(up ? 1 : 0),
    error: () => this.budgetStoreErrors.inc(),
  };
  private readonly retries = new Counter({
    name: "agentserve_retries_total",
    help: "Attempts retried on another backend after a failure before any byte reached the client",
    labelNames: ["tier"] as const,
    registers: [this.registry],
  });
  private readonly migrations = new Counter({
    name: "agentserve_migrations_total",
    help: "Streams broken by their engine mid-answer, by outcome: continued on another engine, failed (no engine could), impossible (the request cannot be continued faithfully), diverged (a regenerated tool call disagreed with the part relayed)",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  private readonly ejections = new Counter({
    name: "agentserve_backend_ejections_total",
    help: "Outlier ejections: an engine taken out by failing requests or stalled token counters",
    labelNames: ["backend", "cause"] as const,
    registers: [this.registry],
  });
  private readonly ejectionsWithheld = new Counter({
    name: "agentserve_backend_ejections_withheld_total",
    help: "Ejections not made because the engine was the last available one of its tier",
    labelNames: ["backend"] as const,
    registers: [this.registry],
  });
  private readonly rejections = new Counter({
    name: "agentserve_rejections_total",
    help: "Requests refused before reaching an engine, by reason",
    labelNames: ["reason"] as const,
    registers: [this.registry],
  });
  private readonly duration = new HotHistogram({
    name: "agentserve_request_duration_seconds",
    help: "End-to-end request duration as the gateway saw it",
    labelName: "tier",
    buckets: LATENCY_BUCKETS_SECONDS,
    registers: [this.registry],
  });
  private readonly ttft = new HotHistogram({
    name: "agentserve_ttft_seconds",
    help: "Time to first token of streamed responses (first content chunk from the engine)",
    labelName: "tier",
    buckets: LATENCY_BUCKETS_SECONDS,
    registers: [this.registry],
  });

  private readonly classifierRequests = new Counter({
    name: "agentserve_classifier_requests_total",
    help: "Tier classifier verdicts by outcome (answered, cached, timeout, error, unparseable)",
    labelNames: ["outcome"] as const,
    registers: [this.registry],
  });
  private readonly kvPredictionErrorRatio = new Histogram({
    name: "agentserve_kv_prediction_error_ratio",
    help:
      "Per turn placed on an engine publishing KV events: |cached tokens the engine reported - tokens its events " +
      "said it held| / prompt tokens",
    labelNames: ["tier"] as const,
    buckets: [0, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1],
    registers: [this.registry],
  });
  private readonly kvPredictionErrorTokens = new Counter({
    name: "agentserve_kv_prediction_error_tokens_total",
    help: "Prompt tokens the engines' KV events mispredicted, by direction (over: predicted more than cached)",
    labelNames: ["tier", "direction"] as const,
    registers: [this.registry],
  });
  private readonly classifierDuration = new Histogram({
    name: "agentserve_classifier_duration_seconds",
    help: "Time the tier classifier's engine calls took (cache hits excluded)",
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  constructor(source: GaugeSource) {
    const registers = [this.registry];
    this.bindingStoreUp.set(1);
    this.bindingStoreErrors.inc(0);
    this.budgetStoreUp.set(1);
    this.budgetStoreErrors.inc(0);
    new Gauge({
      name: "agentserve_backend_up",
      help: "1 when the backend is healthy (up or draining), 0 when down",
      labelNames: ["backend", "tier"] as const,
      registers,
      collect() {
        this.reset();
        for (const b of source.backends()) this.set({ backend: b.id, tier: b.tier }, b.up ? 1 : 0);
      },
    });
    new Gauge({
      name: "agentserve_backend_inflight",
      help: "Requests in flight on the backend",
      labelNames: ["backend"] as const,
      registers,
      collect() {
        this.reset();
        for (const b of source.backends()) this.set({ backend: b.id }, b.inflight);
      },
    });
    new Gauge({
      name: "agentserve_sticky_bindings",
      help: "Live session bindings, by tier",
      labelNames: ["tier"] as const,
      registers,
      collect() {
        this.reset();
        const byTier = new Map<string, number>();
        for (const b of source.backends()) byTier.set(b.tier, (byTier.get(b.tier) ?? 0) + b.bindings);
        for (const [tier, count] of byTier) this.set({ tier }, count);
      },
    });
    new Gauge({
      name: "agentserve_backend_bindings",
      help: "Live session bindings, by backend",
      labelNames: ["backend", "tier"] as const,
      registers,
      collect() {
        this.reset();
        for (const b of source.backends()) this.set({ backend: b.id, tier: b.tier }, b.bindings);
      },
    });
    new Gauge({
      name: "agentserve_queue_depth",
      help: "Requests waiting for a backend slot (max_inflight)",
      registers,
      collect() {
        this.set(source.queueDepth());
      },
    });
    // The engines' own view, read from their /metrics: load signals and the real prefix-cache hit counts.
    const engineGauge = (
      name: string,
      help: string,
      read: (load: EngineLoad) => number | undefined,
    ): void => {
      new Gauge({
        name,
        help,
        labelNames: ["backend", "tier"] as const,
        registers,
        collect() {
          this.reset();
          for (const b of source.backends()) {
            const value = b.engineLoad === undefined ? undefined : read(b.engineLoad);
            if (value !== undefined) this.set({ backend: b.id, tier: b.tier }, value);
          }
        },
      });
    };
    engineGauge(
      "agentserve_backend_running_requests",
      "Requests the engine reports running",
      (l) => l.runningRequests,
    );
    engineGauge(
      "agentserve_backend_waiting_requests",
      "Requests the engine reports waiting",
      (l) => l.waitingRequests,
    );
    engineGauge(
      "agentserve_backend_kv_cache_usage_ratio",
      "The engine's KV-cache usage, 0-1",
      (l) => l.kvCacheUsage,
    );
    engineGauge(
      "agentserve_backend_prefix_cache_queries",
      "The engine's cumulative prefix-cache queries (tokens), as last read; resets when the engine restarts",
      (l) => l.prefixCacheQueries,
    );
    engineGauge(
      "agentserve_backend_prefix_cache_hits",
      "The engine's cumulative prefix-cache hits (tokens), as last read; resets when the engine restarts",
      (l) => l.prefixCacheHits,
    );
    // The process's GC and event-loop collectors start with the first gateway, as they did per gateway.
    processMetrics();
  }

  hit(tier: string): void {
    this.affinityHits.add(1, tier);
  }

  miss(tier: string): void {
    this.affinityMisses.add(1, tier);
  }

  broken(tier: string, count: number): void {
    this.affinityBroken.labels(tier).inc(count);
  }

  spill(tier: string): void {
    this.affinitySpills.labels(tier).inc();
  }

  selection(tier: string, reason: string): void {
    this.selections.add(1, tier, reason);
  }

  retry(tier: string): void {
    this.retries.labels(tier).inc();
  }

  migration(outcome: "continued" | "failed" | "impossible" | "diverged"): void {
    this.migrations.labels(outcome).inc();
  }

  ejection(backend: string, cause: string): void {
    this.ejections.labels(backend, cause).inc();
  }

  ejectionWithheld(backend: string): void {
    this.ejectionsWithheld.labels(backend).inc();
  }

  rejection(reason: string): void {
    this.rejections.labels(reason).inc();
  }

  requestDone(tier: string, backend: string, status: number, durationSeconds: number): void {
    this.requests.add(1, tier, backend, status);
    this.duration.labels(tier).observe(durationSeconds);
  }

  tokens(
    tier: string,
    usage: { promptTokens: number; cachedTokens: number; completionTokens: number },
  ): void {
    this.tokenCounts.add(usage.promptTokens, tier, "prompt");
    this.tokenCounts.add(usage.cachedTokens, tier, "cached");
    this.tokenCounts.add(usage.completionTokens, tier, "completion");
  }

  /** One turn's route receipt (src/receipts): reusable, cached and lost tokens, under the receipt's cause. */
  receipt(receipt: {
    tier: string;
    reusableTokens: number;
    cachedTokens: number;
    lostTokens: number;
    lostCause: string;
  }): void {
    const { tier, lostCause: cause } = receipt;
    let byCause = this.prefixTokenCounts.get(tier);
    if (byCause === undefined) this.prefixTokenCounts.set(tier, (byCause = new Map()));
    let counts = byCause.get(cause);
    if (counts === undefined) {
      const count = (kind: string): HotCount => this.prefixTokens.count(tier, kind, cause);
      counts = { reusable: count("reusable"), cached: count("cached"), lost: count("lost") };
      byCause.set(cause, counts);
    }
    counts.reusable.value += receipt.reusableTokens;
    counts.cached.value += receipt.cachedTokens;
    counts.lost.value += receipt.lostTokens;
  }

  /** A turn's KV-event prediction against the engine's reported cached tokens. */
  kvPrediction(
    tier: string,
    expectedTokens: number,
    usage: { promptTokens: number; cachedTokens: number },
  ): void {
    const error = expectedTokens - usage.cachedTokens;
    if (error > 0) this.kvPredictionErrorTokens.labels(tier, "over").inc(error);
    else if (error < 0) this.kvPredictionErrorTokens.labels(tier, "under").inc(-error);
    this.kvPredictionErrorRatio
      .labels(tier)
      .observe(usage.promptTokens > 0 ? Math.abs(error) / usage.promptTokens : 0);
  }

  firstToken(tier: string, seconds: number): void {
    this.ttft.labels(tier).observe(seconds);
  }

  classifier(outcome: string, seconds: number | undefined): void {
    this.classifierRequests.labels(outcome).inc();
    if (seconds !== undefined) this.classifierDuration.observe(seconds);
  }

  /**
   * Makes every tier's series (and every refusal reason) exist at 0 from the start, so rate(), increase()
   * and ratios see the first burst of traffic too.
   */
  initTiers(tiers: Iterable<string>): void {
    for (const reason of KNOWN_REFUSALS) this.rejections.labels(reason).inc(0);
    for (const outcome of CLASSIFIER_OUTCOMES) this.classifierRequests.labels(outcome).inc(0);
    for (const tier of tiers) {
      this.duration.labels(tier);
      this.ttft.labels(tier);
      this.affinityHits.add(0, tier);
      this.affinityMisses.add(0, tier);
      this.affinityBroken.labels(tier).inc(0);
      this.affinitySpills.labels(tier).inc(0);
      this.retries.labels(tier).inc(0);
      // Every cause from the start: increase() over a series born mid-range misses its first value.
      for (const cause of LOST_CAUSES)
        this.receipt({ tier, lostCause: cause, reusableTokens: 0, cachedTokens: 0, lostTokens: 0 });
    }
  }

  /** The gateway's metrics, then the process's (shared by every gateway of the process: process-metrics.ts). */
  async render(): Promise<string> {
    const [own, processText] = await Promise.all([this.registry.metrics(), processMetrics().metrics()]);
    return `${own}\n${processText}`;
  }

  get contentType(): string {
    return this.registry.contentType;
  }
}
