// A gateway's metrics can be collected once it is dropped: the process's default metrics hold nothing of it.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { GatewayMetrics, type GaugeSource } from "../../src/metrics/gateway-metrics.js";
import { processMetrics } from "../../src/metrics/process-metrics.js";

/** V8's own collector, reachable without starting the process with --expose-gc. */
function collectGarbage(): void {
  setFlagsFromString("--expose-gc");
  (runInNewContext("gc") as () => void)();
}

/**
 * Makes a GatewayMetrics, scrapes it once, and keeps only weak references to it and to its gauge source (the
 * source is what the metrics' collect callbacks hold: in a gateway it reaches the backends, placement and caches).
 */
async function scrapedAndDropped(): Promise<WeakRef<object>[]> {
  const source: GaugeSource = { backends: () => [], queueDepth: () => 0 };
  const metrics = new GatewayMetrics(source);
  expect(await metrics.render()).toContain("process_resident_memory_bytes");
  return [new WeakRef(metrics), new WeakRef(source)];
}

describe("process metrics", () => {
  it("are one registry for the whole process", () => {
    expect(processMetrics()).toBe(processMetrics());
  });

  it("keep no gateway's metrics alive once the gateway is dropped", async () => {
    const dropped = (await Promise.all([scrapedAndDropped(), scrapedAndDropped()])).flat();
    // Finalisation can take more than one full collection, and promise jobs may still hold a reference.
    for (let round = 0; round < 10 && dropped.some((ref) => ref.deref() !== undefined); round++) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      collectGarbage();
    }
    expect(dropped.map((ref) => ref.deref())).toEqual([undefined, undefined, undefined, undefined]);
  });
});
