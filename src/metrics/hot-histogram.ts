// A histogram of one label observed on every request: plain array increments, exposed through prom-client's
// registry as prom-client's own Histogram would expose it.
//
// prom-client's observe() (even a label child's) builds a label object, validates and hashes it, and finds the
// bucket by a property named after the bound (a double turned into a string, twice): about 0.3 µs in a warm loop,
// 1.5-3 µs per request in place (bench/README.md, "Ninth round"). Here a series is found once per label value and
// an observation is a loop over the bounds and three additions; the registry reads it through `get()`, the
// metric interface it reads every metric through (registerMetric).
import type { Histogram, Registry } from "prom-client";

/** A value of an exposed metric, as the registry formats it (prom-client's own histograms give the same). */
interface ExposedValue {
  labels: Record<string, string | number>;
  value: number;
  metricName: string;
  /** prom-client's buckets carry one (null without exemplars): the JSON API gives the same. */
  exemplar?: null;
}

/** One label value's series. */
export class HistogramSeries {
  /** Observations per bucket (not cumulative), the last one past every bound (+Inf). */
  readonly counts: number[];
  sum = 0;
  count = 0;

  constructor(
    private readonly bounds: readonly number[],
    readonly labelValue: string,
  ) {
    this.counts = new Array<number>(bounds.length + 1).fill(0);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) return;
    const bounds = this.bounds;
    let bucket = 0;
    while (bucket < bounds.length && value > bounds[bucket]!) bucket++;
    this.counts[bucket]!++;
    this.sum += value;
    this.count++;
  }
}

export interface HotHistogramOptions {
  name: string;
  help: string;
  labelName: string;
  buckets: readonly number[];
  registers: Registry[];
}

export class HotHistogram {
  readonly name: string;
  readonly help: string;
  private readonly labelName: string;
  private readonly bounds: readonly number[];
  private readonly series = new Map<string, HistogramSeries>();

  constructor(options: HotHistogramOptions) {
    this.name = options.name;
    this.help = options.help;
    this.labelName = options.labelName;
    this.bounds = [...options.buckets].sort((a, b) => a - b);
    // The registry reads a metric through get() (and reset()): this is one, not a prom-client class.
    for (const registry of options.registers) registry.registerMetric(this as unknown as Histogram);
  }

  /** The series of one label value, made (at zero, so that it is exposed) on first use. */
  labels(value: string): HistogramSeries {
    let series = this.series.get(value);
    if (series === undefined) {
      series = new HistogramSeries(this.bounds, value);
      this.series.set(value, series);
    }
    return series;
  }

  reset(): void {
    this.series.clear();
  }

  /** What prom-client's Histogram.get() gives: cumulative buckets, +Inf, sum and count per series. */
  async get(): Promise<{
    name: string;
    help: string;
    type: "histogram";
    aggregator: "sum";
    values: ExposedValue[];
  }> {
    const values: ExposedValue[] = [];
    const bucketName = `${this.name}_bucket`;
    for (const series of this.series.values()) {
      let cumulative = 0;
      this.bounds.forEach((bound, i) => {
        cumulative += series.counts[i]!;
        values.push({
          labels: { le: bound, [this.labelName]: series.labelValue },
          value: cumulative,
          metricName: bucketName,
          exemplar: null,
        });
      });
      const labels = { [this.labelName]: series.labelValue };
      values.push(
        { labels: { le: "+Inf", ...labels }, value: series.count, metricName: bucketName, exemplar: null },
        { labels, value: series.sum, metricName: `${this.name}_sum` },
        { labels, value: series.count, metricName: `${this.name}_count` },
      );
    }
    return { name: this.name, help: this.help, type: "histogram", values, aggregator: "sum" };
  }
}
