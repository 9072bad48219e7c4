// The real engine's Prometheus metrics, under vLLM's names so the same dashboards and studies read both.
import { Counter, Gauge, Histogram, Registry } from "prom-client";

const TTFT_BUCKETS_SECONDS = [0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 10, 20];
const E2E_BUCKETS_SECONDS = [0.1, 0.25, 0.5, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 60, 120];

type Labels = "model_name" | "engine";

export interface RequestTotals {
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
}

export class EngineMetrics {
  readonly registry = new Registry();
  private readonly labels: Record<Labels, string>;
  private readonly promptTokens: Counter<Labels>;
  private readonly queries: Counter<Labels>;
  private readonly hits: Counter<Labels>;
  private readonly generationTokens: Counter<Labels>;
  private readonly finished: Counter<Labels | "finished_reason">;
  private readonly ttft: Histogram<Labels>;
  private readonly e2e: Histogram<Labels>;

  constructor(model: string, state: { running: () => number; waiting: () => number }) {
    const labels = { model_name: model, engine: "0" };
    this.labels = labels;
    const labelNames: Labels[] = ["model_name", "engine"];
    const registers = [this.registry];
    const counter = (name: string, help: string): Counter<Labels> =>
      new Counter<Labels>({ name, help, labelNames, registers });
    this.promptTokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.");
    this.queries = counter(
      "vllm:prefix_cache_queries_total",
      "Prefix cache queries, in terms of number of queried tokens.",
    );
    this.hits = counter(
      "vllm:prefix_cache_hits_total",
      "Prefix cache hits, in terms of number of cached tokens.",
    );
    this.generationTokens = counter("vllm:generation_tokens_total", "Number of generation tokens processed.");
    this.finished = new Counter({
      name: "vllm:request_success_total",
      help: "Count of successfully processed requests.",
      labelNames: [...labelNames, "finished_reason"],
      registers,
    });
    for (const name of ["vllm:num_requests_running", "vllm:num_requests_waiting"] as const) {
      const read = name === "vllm:num_requests_running" ? state.running : state.waiting;
      new Gauge<Labels>({
        name,
        help: name.endsWith("running") ? "Requests holding a slot." : "Requests waiting for a slot.",
        labelNames,
        registers,
        collect() {
          this.set(labels, read());
        },
      });
    }
    this.ttft = new Histogram<Labels>({
      name: "vllm:time_to_first_token_seconds",
      help: "Histogram of time to first token in seconds.",
      labelNames,
      buckets: TTFT_BUCKETS_SECONDS,
      registers,
    });
    this.e2e = new Histogram<Labels>({
      name: "vllm:e2e_request_latency_seconds",
      help: "Histogram of e2e request latency in seconds.",
      labelNames,
      buckets: E2E_BUCKETS_SECONDS,
      registers,
    });
  }

  /** A request's prompt was evaluated: counted whether or not it then finishes. */
  observePrefill(totals: Pick<RequestTotals, "promptTokens" | "cachedTokens">, ttftSeconds: number): void {
    this.promptTokens.inc(this.labels, totals.promptTokens);
    this.queries.inc(this.labels, totals.promptTokens);
    this.hits.inc(this.labels, totals.cachedTokens);
    this.ttft.observe(this.labels, ttftSeconds);
  }

  observeFinished(completionTokens: number, reason: "stop" | "length" | "abort", e2eSeconds: number): void {
    this.generationTokens.inc(this.labels, completionTokens);
    this.finished.inc({ ...this.labels, finished_reason: reason });
    if (reason !== "abort") this.e2e.observe(this.labels, e2eSeconds);
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}
