// The flow scheduler's metrics: waiting and wait per priority band, tokens served per flow (top-k labels
// only), Jain's fairness index over the active flows' attained service.
import { Counter, Gauge, type Registry } from "prom-client";
import { HotHistogram, type HistogramSeries } from "./hot-histogram.js";
import { jainIndex } from "./jain-index.js";

/** What the metrics read at scrape time (the gateway's BackendSlots). */
export interface FlowSource {
  readonly bands: number;
  waitingIn(band: number): number;
  /** The active flows' attained service (weighted tokens, decayed). */
  activeService(): number[];
}

const WAIT_BUCKETS_SECONDS = [0, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export class FlowMetrics {
  private source: FlowSource | undefined;
  private topFlows = 20;
  /** Tokens served per flow, least recently served first; bounded (a flow forgotten here leaves the metric). */
  private readonly servedTokens = new Map<string, number>();
  private readonly wait: HotHistogram;
  /** The histogram's series per band, found without a lookup by label. */
  private readonly waitByBand: HistogramSeries[] = [];

  constructor(registry: Registry) {
    // prom-client's collect() runs with the metric as `this`: the state it reads is reached through these.
    const source = (): FlowSource | undefined => this.source;
    const top = (): [string, number][] => this.top();
    new Gauge({
      name: "agentserve_queue_waiting",
      help: "Requests waiting for an engine slot, by priority band (admission.scheduling)",
      labelNames: ["band"] as const,
      registers: [registry],
      collect() {
        const from = source();
        if (from === undefined) return;
        for (let band = 0; band < from.bands; band++) this.set({ band: String(band) }, from.waitingIn(band));
      },
    });
    this.wait = new HotHistogram({
      name: "agentserve_queue_wait_seconds",
      help: "Time requests waited for an engine slot (0 when one was free), by priority band",
      labelName: "band",
      buckets: WAIT_BUCKETS_SECONDS,
      registers: [registry],
    });
    new Counter({
      name: "agentserve_flow_served_tokens_total",
      help: "Tokens served per flow (agent, else session): computed prompt plus generated; the top flows only (admission.scheduling.metrics_top_flows)",
      labelNames: ["flow"] as const,
      registers: [registry],
      collect() {
        this.reset();
        for (const [flow, tokens] of top()) this.inc({ flow }, tokens);
      },
    });
    new Gauge({
      name: "agentserve_flow_fairness_index",
      help: "Jain's fairness index of the active flows' attained service (1: equal shares; 1/n: one flow has all)",
      registers: [registry],
      collect() {
        this.set(jainIndex(source()?.activeService() ?? []));
      },
    });
    new Gauge({
      name: "agentserve_flows_active",
      help: "Flows with attained service that has not decayed away (admission.scheduling.half_life_seconds)",
      registers: [registry],
      collect() {
        this.set(source()?.activeService().length ?? 0);
      },
    });
  }

  /** Where waiting counts and service are read; how many flows the served-tokens metric names. */
  attach(source: FlowSource, topFlows: number): void {
    this.source = source;
    this.topFlows = topFlows;
  }

  waited(band: number, seconds: number): void {
    let child = this.waitByBand[band];
    if (child === undefined) this.waitByBand[band] = child = this.wait.labels(String(band));
    child.observe(seconds);
  }

  served(flow: string, tokens: number): void {
    if (tokens <= 0) return;
    const total = (this.servedTokens.get(flow) ?? 0) + tokens;
    this.servedTokens.delete(flow);
    this.servedTokens.set(flow, total);
    // Ten times the named flows are tracked, so a heavy flow is rarely forgotten before it ranks.
    if (this.servedTokens.size > this.topFlows * 10) {
      this.servedTokens.delete(this.servedTokens.keys().next().value!);
    }
  }

  private top(): [string, number][] {
    return [...this.servedTokens].sort((a, b) => b[1] - a[1]).slice(0, this.topFlows);
  }
}
