// vLLM's Prometheus metrics for one simulated engine, on a registry of its own (never prom-client's global one).
//
// Names, labels (model_name, engine) and histogram buckets follow vLLM's V1 PrometheusStatLogger. Gauges and
// counters are read from the scheduler when scraped; latency histograms are fed as requests finish. Latencies are
// in simulated seconds: with --time-scale X they are X times the wall-clock latency a client sees.
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { EngineRequest } from "./request.js";
import type { Scheduler, SchedulerTotals } from "./scheduler.js";

const TTFT_BUCKETS_SECONDS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
  80.0, 160.0, 640.0, 2560.0,
];
const TPOT_BUCKETS_SECONDS = [
  0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
];
const REQUEST_LATENCY_BUCKETS_SECONDS = [
  0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
  960.0, 1920.0, 7680.0,
];

type Labels = "model_name" | "engine";

export interface SimMetricsOptions {
  model: string;
  engineLabel: string;
  blockSizeTokens: number;
  kvCapacityBlocks: number;
  scheduler: Scheduler;
}

export class SimMetrics {
  readonly registry = new Registry();
  private readonly ttft: Histogram<Labels>;
  private readonly e2e: Histogram<Labels>;
  private readonly tpot: Histogram<Labels>;
  private readonly queueTime: Histogram<Labels>;
  private readonly labels: Record<Labels, string>;

  constructor(options: SimMetricsOptions) {
    const labels = { model_name: options.model, engine: options.engineLabel };
    this.labels = labels;
    const labelNames: Labels[] = ["model_name", "engine"];
    const registers = [this.registry];
    const scheduler = options.scheduler;

    const gauge = (name: string, help: string, read: () => number): void => {
      new Gauge<Labels>({
        name,
        help,
        labelNames,
        registers,
        collect() {
          this.set(labels, read());
        },
      });
    };
    gauge(
      "vllm:num_requests_running",
      "Number of requests in model execution batches.",
      () => scheduler.numRunning,
    );
    gauge(
      "vllm:num_requests_waiting",
      "Number of requests waiting to be processed.",
      () => scheduler.numWaiting,
    );
    gauge(
      "vllm:kv_cache_usage_perc",
      "KV-cache usage. 1 means 100 percent usage.",
      () => scheduler.kvCacheUsage,
    );
    gauge(
      "vllm:gpu_cache_usage_perc",
      "GPU KV-cache usage. 1 means 100 percent usage. Deprecated name of vllm:kv_cache_usage_perc.",
      () => scheduler.kvCacheUsage,
    );

    // Counters mirror the scheduler's running totals: each scrape adds what happened since the last one.
    const counter = (name: string, help: string, key: keyof SchedulerTotals): void => {
      let reported = 0;
      new Counter<Labels>({
        name,
        help,
        labelNames,
        registers,
        collect() {
          const total = scheduler.totals[key];
          this.inc(labels, total - reported);
          reported = total;
        },
      });
    };
    counter(
      "vllm:prefix_cache_queries_total",
      "Prefix cache queries, in terms of number of queried tokens.",
      "prefixCacheQueries",
    );
    counter(
      "vllm:prefix_cache_hits_total",
      "Prefix cache hits, in terms of number of cached tokens.",
      "prefixCacheHits",
    );
    counter(
      "vllm:gpu_prefix_cache_queries_total",
      "GPU prefix cache queries (deprecated name of vllm:prefix_cache_queries).",
      "prefixCacheQueries",
    );
    counter(
      "vllm:gpu_prefix_cache_hits_total",
      "GPU prefix cache hits (deprecated name of vllm:prefix_cache_hits).",
      "prefixCacheHits",
    );
    counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", "promptTokens");
    counter("vllm:generation_tokens_total", "Number of generation tokens processed.", "generationTokens");
    counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", "preemptions");

    const reasons: [string, keyof SchedulerTotals][] = [
      ["stop", "finishedStop"],
      ["length", "finishedLength"],
      ["abort", "finishedAbort"],
    ];
    const reported = new Map<string, number>();
    new Counter<Labels | "finished_reason">({
      name: "vllm:request_success_total",
      help: "Count of successfully processed requests.",
      labelNames: [...labelNames, "finished_reason"],
      registers,
      collect() {
        for (const [reason, key] of reasons) {
          const total = scheduler.totals[key];
          this.inc({ ...labels, finished_reason: reason }, total - (reported.get(reason) ?? 0));
          reported.set(reason, total);
        }
      },
    });

    new Gauge<"block_size" | "num_gpu_blocks" | "enable_prefix_caching" | "engine">({
      name: "vllm:cache_config_info",
      help: "Information of the LLMEngine CacheConfig",
      labelNames: ["block_size", "num_gpu_blocks", "enable_prefix_caching", "engine"],
      registers,
    }).set(
      {
        block_size: String(options.blockSizeTokens),
        num_gpu_blocks: String(options.kvCapacityBlocks),
        enable_prefix_caching: "True",
        engine: options.engineLabel,
      },
      1,
    );

    const histogram = (name: string, help: string, buckets: number[]): Histogram<Labels> =>
      new Histogram<Labels>({ name, help, labelNames, buckets, registers });
    this.ttft = histogram(
      "vllm:time_to_first_token_seconds",
      "Histogram of time to first token in seconds.",
      TTFT_BUCKETS_SECONDS,
    );
    this.tpot = histogram(
      "vllm:time_per_output_token_seconds",
      "Histogram of time per output token in seconds.",
      TPOT_BUCKETS_SECONDS,
    );
    this.e2e = histogram(
      "vllm:e2e_request_latency_seconds",
      "Histogram of e2e request latency in seconds.",
      REQUEST_LATENCY_BUCKETS_SECONDS,
    );
    this.queueTime = histogram(
      "vllm:request_queue_time_seconds",
      "Histogram of time spent in WAITING phase for request.",
      REQUEST_LATENCY_BUCKETS_SECONDS,
    );
  }

  /** Records the latencies of a request that finished normally (aborted ones are only counted). */
  observeFinished(request: EngineRequest): void {
    const { arrivalMs, firstScheduledMs, firstTokenMs, finishedMs } = request;
    if (firstTokenMs === undefined || finishedMs === undefined) return;
    this.ttft.observe(this.labels, (firstTokenMs - arrivalMs) / 1000);
    this.e2e.observe(this.labels, (finishedMs - arrivalMs) / 1000);
    if (firstScheduledMs !== undefined)
      this.queueTime.observe(this.labels, (firstScheduledMs - arrivalMs) / 1000);
    const decoded = request.numOutputTokens - 1;
    if (decoded > 0) this.tpot.observe(this.labels, (finishedMs - firstTokenMs) / 1000 / decoded);
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}
