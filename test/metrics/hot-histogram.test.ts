// HotHistogram (src/metrics/hot-histogram.ts) is exposed exactly as prom-client's Histogram of the same
// observations: the registry cannot tell them apart.
import { Histogram, Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { HotHistogram } from "../../src/metrics/hot-histogram.js";

const BUCKETS = [0.005, 0.01, 0.1, 1];
const OBSERVED: [string, number][] = [
  ["small", 0.0004],
  ["small", 0.005],
  ["small", 0.0051],
  ["large", 0.5],
  ["small", 2],
  ["large", 0],
];

describe("HotHistogram", () => {
  it("is exposed as prom-client's Histogram of the same observations, text and JSON", async () => {
    const theirs = new Registry();
    const reference = new Histogram({
      name: "x_seconds",
      help: "h",
      labelNames: ["tier"] as const,
      buckets: BUCKETS,
      registers: [theirs],
    });
    const ours = new Registry();
    const hot = new HotHistogram({
      name: "x_seconds",
      help: "h",
      labelName: "tier",
      buckets: BUCKETS,
      registers: [ours],
    });
    reference.zero({ tier: "idle" });
    hot.labels("idle");
    for (const [tier, value] of OBSERVED) {
      reference.labels(tier).observe(value);
      hot.labels(tier).observe(value);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(await ours.getMetricsAsJSON()).toEqual(await theirs.getMetricsAsJSON());
    ours.resetMetrics();
    theirs.resetMetrics();
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });
});
