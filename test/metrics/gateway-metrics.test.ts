import { describe, expect, it } from "vitest";
import { createBalancer } from "../../src/affinity/balancers.js";
import { MemoryBindingStore } from "../../src/affinity/memory-bindings.js";
import { PlacementService } from "../../src/affinity/placement-service.js";
import { StickyTable } from "../../src/affinity/sticky-table.js";
import { ManualClock } from "../../src/core/clock.js";
import { SeededRandom } from "../../src/core/random.js";
import { GatewayMetrics, type BackendSnapshot, type GaugeSource } from "../../src/metrics/gateway-metrics.js";
import { candidates, TEST_HASH_KEY } from "../affinity/helpers.js";

type FakeBackend = Omit<BackendSnapshot, "engineLoad"> & Partial<Pick<BackendSnapshot, "engineLoad">>;

function fakeSource(backends: FakeBackend[], queueDepth = { value: 0 }): GaugeSource {
  return {
    backends: () => backends.map((b) => ({ engineLoad: undefined, ...b })),
    queueDepth: () => queueDepth.value,
  };
}

/** Parses the exposition text into `name{labels}` -> value, with labels sorted so lookups are stable. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)/.exec(line);
    if (!match) throw new Error(`unparsable line: ${line}`);
    const labels = (match[2] ?? "")
      .split(/,(?=[a-zA-Z_]+=")/)
      .filter((l) => l !== "")
      .sort()
      .join(",");
    out.set(labels === "" ? match[1]! : `${match[1]}{${labels}}`, Number(match[3]));
  }
  return out;
}

function types(text: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const match of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) out.set(match[1]!, match[2]!);
  return out;
}

async function scrape(metrics: GatewayMetrics) {
  const text = await metrics.render();
  return { text, samples: samples(text), types: types(text) };
}

const BACKENDS: FakeBackend[] = [
  { id: "big-0", tier: "big", up: true, inflight: 3, bindings: 40 },
  { id: "small-0", tier: "small", up: true, inflight: 1, bindings: 25 },
  { id: "small-1", tier: "small", up: false, inflight: 0, bindings: 5 },
];

describe("GatewayMetrics: the contract names", () => {
  it("renders every contract metric with its type", async () => {
    const metrics = new GatewayMetrics(fakeSource(BACKENDS));
    metrics.initTiers(["big", "small"]);
    metrics.requestDone("small", "small-0", 200, 0.2);
    metrics.firstToken("small", 0.05);
    const { types: found } = await scrape(metrics);
    expect(Object.fromEntries([...found].filter(([name]) => name.startsWith("agentserve_")))).toEqual({
      agentserve_affinity_hits_total: "counter",
      agentserve_affinity_misses_total: "counter",
      agentserve_binding_store_errors_total: "counter",
      agentserve_binding_store_up: "gauge",
      agentserve_budget_store_errors_total: "counter",
      agentserve_budget_store_up: "gauge",
      agentserve_affinity_broken_total: "counter",
      agentserve_affinity_spills_total: "counter",
      agentserve_requests_total: "counter",
      agentserve_selections_total: "counter",
      agentserve_tokens_total: "counter",
      agentserve_retries_total: "counter",
      agentserve_rejections_total: "counter",
      agentserve_request_duration_seconds: "histogram",
      agentserve_ttft_seconds: "histogram",
      agentserve_classifier_requests_total: "counter",
      agentserve_prefix_tokens_total: "counter",
      agentserve_classifier_duration_seconds: "histogram",
      agentserve_backend_up: "gauge",
      agentserve_backend_inflight: "gauge",
      agentserve_sticky_bindings: "gauge",
      agentserve_backend_bindings: "gauge",
      agentserve_backend_ejections_total: "counter",
      agentserve_backend_ejections_withheld_total: "counter",
      agentserve_queue_depth: "gauge",
      agentserve_queue_waiting: "gauge",
      agentserve_queue_wait_seconds: "histogram",
      agentserve_flow_served_tokens_total: "counter",
      agentserve_flow_fairness_index: "gauge",
      agentserve_flows_active: "gauge",
      agentserve_kv_prediction_error_ratio: "histogram",
      agentserve_migrations_total: "counter",
      agentserve_kv_prediction_error_tokens_total: "counter",
      agentserve_backend_running_requests: "gauge",
      agentserve_backend_waiting_requests: "gauge",
      agentserve_backend_kv_cache_usage_ratio: "gauge",
      agentserve_backend_prefix_cache_queries: "gauge",
      agentserve_backend_prefix_cache_hits: "gauge",
    });
  });

  it("includes the runtime's default process metrics", async () => {
    const { types: found, samples: values } = await scrape(new GatewayMetrics(fakeSource([])));
    for (const name of [
      "process_cpu_user_seconds_total",
      "process_resident_memory_bytes",
      "process_start_time_seconds",
      "nodejs_heap_size_used_bytes",
      "nodejs_eventloop_lag_seconds",
    ]) {
      expect(found.has(name), name).toBe(true);
    }
    expect(values.get("process_resident_memory_bytes")).toBeGreaterThan(0);
  });

  it("makes every tier's affinity and retry series exist at 0 from the start", async () => {
    const metrics = new GatewayMetrics(fakeSource([]));
    metrics.initTiers(["big", "small"]);
    const { samples: values } = await scrape(metrics);
    for (const tier of ["big", "small"]) {
      for (const name of [
        "agentserve_affinity_hits_total",
        "agentserve_affinity_misses_total",
        "agentserve_affinity_broken_total",
        "agentserve_retries_total",
      ]) {
        expect(values.get(`${name}{tier="${tier}"}`), `${name} ${tier}`).toBe(0);
      }
    }
  });

  it("keeps each instance in a registry of its own (two gateways in one process do not collide)", async () => {
    const a = new GatewayMetrics(fakeSource([]));
    const b = new GatewayMetrics(fakeSource([]));
    a.hit("small");
    expect((await scrape(a)).samples.get('agentserve_affinity_hits_total{tier="small"}')).toBe(1);
    expect((await scrape(b)).samples.has('agentserve_affinity_hits_total{tier="small"}')).toBe(false);
    expect(a.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
  });
});

describe("GatewayMetrics: the recorder methods move the right series", () => {
  it("hit, miss and broken count per tier", async () => {
    const metrics = new GatewayMetrics(fakeSource([]));
    metrics.hit("small");
    metrics.hit("small");
    metrics.miss("small");
    metrics.miss("big");
    metrics.broken("small", 7);
    metrics.broken("small", 1);
    const { samples: values } = await scrape(metrics);
    expect(values.get('agentserve_affinity_hits_total{tier="small"}')).toBe(2);
    expect(values.get('agentserve_affinity_hits_total{tier="big"}')).toBeUndefined();
    expect(values.get('agentserve_affinity_misses_total{tier="small"}')).toBe(1);
    expect(values.get('agentserve_affinity_misses_total{tier="big"}')).toBe(1);
    expect(values.get('agentserve_affinity_broken_total{tier="small"}')).toBe(8);
  });

  it("requestDone counts by tier, backend and status and observes the duration histogram", async () => {
    const metrics = new GatewayMetrics(fakeSource([]));
    metrics.requestDone("small", "small-0", 200, 0.3);
    metrics.requestDone("small", "small-0", 200, 1.5);
    metrics.requestDone("small", "small-1", 502, 0.02);
    const { samples: values } = await scrape(metrics);
    expect(values.get('agentserve_requests_total{backend="small-0",status="200",tier="small"}')).toBe(2);
    expect(values.get('agentserve_requests_total{backend="small-1",status="502",tier="small"}')).toBe(1);
    expect(values.get('agentserve_request_duration_seconds_count{tier="small"}')).toBe(3);
    expect(values.get('agentserve_request_duration_seconds_sum{tier="small"}')).toBeCloseTo(1.82, 10);
    expect(values.get('agentserve_request_duration_seconds_bucket{le="0.025",tier="small"}')).toBe(1);
    expect(values.get('agentserve_request_duration_seconds_bucket{le="0.25",tier="small"}')).toBe(1);
    expect(values.get('agentserve_request_duration_seconds_bucket{le="0.5",tier="small"}')).toBe(2);
    expect(values.get('agentserve_request_duration_seconds_bucket{le="2.5",tier="small"}')).toBe(3);
    expect(values.get('agentserve_request_duration_seconds_bucket{le="+Inf",tier="small"}')).toBe(3);
    expect(values.get('agentserve_ttft_seconds_count{tier="small"}')).toBeUndefined(); // only firstToken observes it
  });

  it("firstToken, retry, selection and rejection move their own series only", async () => {
    const metrics = new GatewayMetrics(fakeSource([]));
    metrics.firstToken("big", 0.4);
    metrics.retry("big");
    metrics.retry("big");
    metrics.selection("big", "failover");
    metrics.rejection("budget");
    const { samples: values } = await scrape(metrics);
    expect(values.get('agentserve_ttft_seconds_count{tier="big"}')).toBe(1);
    expect(values.get('agentserve_ttft_seconds_sum{tier="big"}')).toBeCloseTo(0.4, 10);
    expect(values.get('agentserve_ttft_seconds_bucket{le="0.25",tier="big"}')).toBe(0);
    expect(values.get('agentserve_ttft_seconds_bucket{le="0.5",tier="big"}')).toBe(1);
    expect(values.get('agentserve_retries_total{tier="big"}')).toBe(2);
    expect(values.get('agentserve_selections_total{reason="failover",tier="big"}')).toBe(1);
    expect(values.get('agentserve_rejections_total{reason="budget"}')).toBe(1);
    expect(values.get('agentserve_request_duration_seconds_count{tier="big"}')).toBeUndefined();
  });

  it("reads the gauges from the source at scrape time, dropping series of backends that are gone", async () => {
    const backends = BACKENDS.map((b) => ({ ...b }));
    const queue = { value: 4 };
    const metrics = new GatewayMetrics(fakeSource(backends, queue));
    let values = (await scrape(metrics)).samples;
    expect(values.get('agentserve_backend_up{backend="big-0",tier="big"}')).toBe(1);
    expect(values.get('agentserve_backend_up{backend="small-1",tier="small"}')).toBe(0);
    expect(values.get('agentserve_backend_inflight{backend="big-0"}')).toBe(3);
    expect(values.get('agentserve_backend_inflight{backend="small-0"}')).toBe(1);
    expect(values.get('agentserve_sticky_bindings{tier="big"}')).toBe(40);
    expect(values.get('agentserve_sticky_bindings{tier="small"}')).toBe(30);
    expect(values.get("agentserve_queue_depth")).toBe(4);

    backends.splice(0, 1); // big-0 removed by a reload
    backends[1]!.up = true;
    backends[0]!.inflight = 9;
    queue.value = 0;
    values = (await scrape(metrics)).samples;
    expect(values.has('agentserve_backend_up{backend="big-0",tier="big"}')).toBe(false);
    expect(values.has('agentserve_backend_inflight{backend="big-0"}')).toBe(false);
    expect(values.has('agentserve_sticky_bindings{tier="big"}')).toBe(false);
    expect(values.get('agentserve_backend_up{backend="small-1",tier="small"}')).toBe(1);
    expect(values.get('agentserve_backend_inflight{backend="small-0"}')).toBe(9);
    expect(values.get("agentserve_queue_depth")).toBe(0);
  });

  it("serves as the scheduler's recorder: a 6-turn session is 1 miss and 5 hits in Prometheus", async () => {
    const metrics = new GatewayMetrics(fakeSource([]));
    metrics.initTiers(["small"]);
    const scheduler = new PlacementService({
      store: new MemoryBindingStore(new StickyTable(100, TEST_HASH_KEY)),
      clock: new ManualClock(0),
      balancer: createBalancer("least_inflight", new SeededRandom(1)),
      recorder: metrics,
      stickyTtlMs: 1_800_000,
      loadFactor: 1.25,
      sessionless: "prefix",
    });
    const list = candidates(2, "small");
    for (let turn = 0; turn < 6; turn++) await scheduler.place("s", "small", list);
    list.find(async (c) => c.id === (await scheduler.boundBackend("s")))!.state = "down";
    await scheduler.onBackendDown((await scheduler.boundBackend("s"))!, "small");
    const { samples: values } = await scrape(metrics);
    expect(values.get('agentserve_affinity_hits_total{tier="small"}')).toBe(5);
    expect(values.get('agentserve_affinity_misses_total{tier="small"}')).toBe(1);
    expect(values.get('agentserve_affinity_broken_total{tier="small"}')).toBe(1);
    expect(values.get('agentserve_affinity_spills_total{tier="small"}')).toBe(0);
  });

  it("counts a spill in agentserve_affinity_spills_total{tier} (and as a miss, not a hit)", async () => {
    const metrics = new GatewayMetrics(fakeSource([]));
    metrics.initTiers(["small"]);
    const scheduler = new PlacementService({
      store: new MemoryBindingStore(new StickyTable(100, TEST_HASH_KEY)),
      clock: new ManualClock(0),
      balancer: createBalancer("least_inflight", new SeededRandom(1)),
      recorder: metrics,
      stickyTtlMs: 1_800_000,
      loadFactor: 1.25,
      sessionless: "prefix",
    });
    const list = candidates(2, "small");
    const first = (await scheduler.place("s", "small", list))!.backend.id;
    const pinned = list.find((c) => c.id === first)!;
    pinned.maxInflight = 1;
    pinned.inflight = 1;
    expect((await scheduler.place("s", "small", list))!.reason).toBe("spill");
    const { samples: values } = await scrape(metrics);
    expect(values.get('agentserve_affinity_spills_total{tier="small"}')).toBe(1);
    expect(values.get('agentserve_affinity_hits_total{tier="small"}')).toBe(0);
    expect(values.get('agentserve_affinity_misses_total{tier="small"}')).toBe(2);
  });
});

describe("GatewayMetrics: the engines' own numbers", () => {
  it("publishes each engine's last reading, and nothing for an engine never read", async () => {
    const metrics = new GatewayMetrics(
      fakeSource([
        {
          id: "small-0",
          tier: "small",
          up: true,
          inflight: 1,
          bindings: 0,
          engineLoad: {
            runningRequests: 3,
            waitingRequests: 2,
            kvCacheUsage: 0.25,
            prefixCacheQueries: 1000,
            prefixCacheHits: 800,
            readAtMs: 0,
          },
        },
        { id: "small-1", tier: "small", up: true, inflight: 0, bindings: 0 },
      ]),
    );
    const values = samples(await metrics.render());
    expect(values.get('agentserve_backend_waiting_requests{backend="small-0",tier="small"}')).toBe(2);
    expect(values.get('agentserve_backend_running_requests{backend="small-0",tier="small"}')).toBe(3);
    expect(values.get('agentserve_backend_kv_cache_usage_ratio{backend="small-0",tier="small"}')).toBe(0.25);
    expect(values.get('agentserve_backend_prefix_cache_hits{backend="small-0",tier="small"}')).toBe(800);
    expect(values.get('agentserve_backend_prefix_cache_queries{backend="small-0",tier="small"}')).toBe(1000);
    expect(
      [...values.keys()].some((k) => k.includes('backend="small-1"') && k.includes("prefix_cache")),
    ).toBe(false);
  });
});
