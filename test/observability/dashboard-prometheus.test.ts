// The Grafana dashboard's queries, proven against a real Prometheus: simulated engines and the gateway of
// configs/gateway.yaml (on OS-assigned ports) are scraped with configs/prometheus.yml (its targets rewritten
// to those ports, 1 s scrapes), a known agent workload runs, and every PromQL expression of the dashboard
// must parse and return data; the affinity hit-rate panels must show exactly 5/6 for 6-turn sessions, and the
// flow scheduling panels the flows, bands and waits the workload made.
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse as parseYaml, stringify as stringifyYaml } from "yaml";
import { parseConfigText } from "../../src/config/load.js";
import {
  BIG_MODEL,
  SMALL_MODEL,
  chat,
  metricValue,
  scrape,
  startCluster,
  type Cluster,
} from "../helpers/cluster.js";
import {
  dashboardQueries,
  loadDashboard,
  provisionedDatasource,
  repoFile,
  substituteVariables,
  type Dashboard,
} from "./grafana-dashboard.js";
import { requiredTool, startPrometheus, waitFor, type PrometheusHandle, type Sample } from "./prometheus.js";

const prometheusBinary = requiredTool("prometheus");

const TURNS = 6;
const SESSIONS: Record<string, number> = { big: 4, small: 8 };
const CAPPED_AGENT = "capped";
/** The agent running every small-tier session, in band 2 and held to one slot at a time: its turns wait. */
const FLEET_AGENT = "fleet";
const FLEET_BAND = "2";
const SCRAPE_SECONDS = 1;
/** A coding agent's prompt: a long shared prefix (system prompt with tool definitions), then its history. */
const SYSTEM_PROMPT =
  "You are a coding agent. Tools: read_file(path), write_file(path, text), run_tests(). ".repeat(30);

/** configs/prometheus.yml with its targets moved to the ports the test's processes listen on. */
function prometheusConfigFor(cluster: Cluster, gatewayPort: number): string {
  const shipped = parseYaml(readFileSync(repoFile("configs/prometheus.yml"), "utf8")) as {
    global: Record<string, unknown>;
    scrape_configs: {
      job_name: string;
      static_configs: { targets: string[]; labels?: Record<string, string> }[];
    }[];
  };
  const moved = new Map<string, string>([[`127.0.0.1:${gatewayPort}`, new URL(cluster.url).host]]);
  for (const backend of shippedGatewayConfig().backends) {
    const engine = cluster.engines.get(backend.id);
    if (engine === undefined) throw new Error(`no engine ${backend.id} in the cluster`);
    moved.set(new URL(backend.base_url).host, new URL(engine.url).host);
  }
  shipped.global = {
    ...shipped.global,
    scrape_interval: `${SCRAPE_SECONDS}s`,
    scrape_timeout: `${SCRAPE_SECONDS}s`,
    evaluation_interval: `${SCRAPE_SECONDS}s`,
  };
  for (const job of shipped.scrape_configs) {
    for (const group of job.static_configs) {
      group.targets = group.targets.map((target) => {
        const to = moved.get(target);
        if (to === undefined)
          throw new Error(`configs/prometheus.yml target ${target} is not in configs/gateway.yaml`);
        return to;
      });
    }
  }
  return stringifyYaml(shipped);
}

function shippedGatewayConfig(): ReturnType<typeof parseConfigText> {
  const path = repoFile("configs/gateway.yaml");
  return parseConfigText(readFileSync(path, "utf8"), path);
}

function finite(samples: Sample[]): Sample[] {
  return samples.filter((s) => Number.isFinite(s.value));
}

function byLabel(samples: Sample[], label: string): Record<string, number> {
  return Object.fromEntries(samples.map((s) => [s.metric[label] ?? "", s.value]));
}

describe.skipIf(prometheusBinary.skip)("the Grafana dashboard against a real Prometheus", () => {
  let cluster: Cluster;
  let prometheus: PrometheusHandle | undefined;
  let dashboard: Dashboard;
  /** Backend of each session, and whether each turn was an affinity hit, as the gateway answered. */
  const sessions = new Map<string, { tier: string; backends: Set<string>; hits: boolean[] }>();

  async function turn(session: string, tier: string, n: number, agent?: string): Promise<void> {
    const messages = [{ role: "system", content: SYSTEM_PROMPT }];
    for (let k = 0; k < n; k++) {
      messages.push({ role: "user", content: `${session}: step ${k}, run the tests` });
      messages.push({ role: "assistant", content: `step ${k}: 3 tests passed` });
    }
    messages.push({ role: "user", content: `${session}: step ${n}, run the tests` });
    const response = await chat(cluster.url, {
      session,
      model: tier === "big" ? BIG_MODEL : SMALL_MODEL,
      stream: n % 2 === 1,
      maxTokens: 8,
      messages,
      headers: agent === undefined ? {} : { "x-agent-id": agent },
    });
    expect(response.status, response.text).toBe(200);
    const record = sessions.get(session) ?? { tier, backends: new Set<string>(), hits: [] };
    record.backends.add(response.headers.get("x-agent-serve-backend") ?? "?");
    record.hits.push(response.headers.get("x-agent-serve-affinity-hit") === "true");
    sessions.set(session, record);
  }

  async function overBudget(): Promise<void> {
    // As long a prompt as its first turn's: more than the budget has left after that turn.
    const response = await chat(cluster.url, {
      headers: { "x-agent-id": CAPPED_AGENT },
      messages: [
        { role: "system", content: SYSTEM_PROMPT },
        { role: "user", content: "again" },
      ],
    });
    expect(response.status).toBe(429);
  }

  beforeAll(async () => {
    dashboard = loadDashboard(provisionedDatasource().uid);
    const shipped = shippedGatewayConfig();
    cluster = await startCluster(
      shipped.backends.map((b) => ({ id: b.id, tier: b.tier })),
      {
        health: { engine_metrics_interval_seconds: 0.2 },
        admission: {
          // Enough for one turn's held estimate (about 900 tokens), not for a second turn.
          agents: { [CAPPED_AGENT]: { token_budget: 1000 } },
          max_inflight_per_agent: 1,
          scheduling: { agents: { [FLEET_AGENT]: { band: Number(FLEET_BAND) } } },
        },
      },
    );
  });

  afterAll(async () => {
    await prometheus?.stop();
    await cluster?.close();
  });

  it("evaluates every dashboard expression; the hit-rate panels show exactly 5/6 for 6-turn sessions; the flow panels the workload's flows and waits", async () => {
    if (prometheusBinary.path === undefined) throw new Error(prometheusBinary.missing);
    const shipped = shippedGatewayConfig();
    prometheus = await startPrometheus(
      prometheusBinary.path,
      prometheusConfigFor(cluster, shipped.server.port),
    );
    const prom = prometheus;
    const expectedTargets = 1 + shipped.backends.length;

    // 1. First scrape of every target, before any traffic: the counters' first samples are 0.
    await waitFor("the first scrape of every target", async () => {
      const targets = await prom.targets();
      return targets.length === expectedTargets && targets.every((t) => t.health === "up");
    });
    await waitFor("the zeroed affinity counters and the engines' counters in Prometheus", async () => {
      const tiers = await prom.query("agentserve_affinity_misses_total");
      const engines = await prom.query("vllm:prefix_cache_queries_total");
      return tiers.length === 2 && engines.length === shipped.backends.length;
    });

    // 2. The workload: 4 big-tier and 8 small-tier sessions of 6 turns (odd turns streamed), in two phases
    // with a scrape between them, as steady traffic would be: series that only appear with a request
    // (the latency histograms' tier children, the rejections' reasons) must have moved between two
    // scrapes for rate() to see them. The first turn of one session is charged to an agent with a 1-token
    // budget, whose next requests are refused (429 budget_exceeded) before reaching the scheduler.
    // The small-tier sessions are one agent's (FLEET_AGENT, one slot at a time), so its turns queue.
    const names = Object.entries(SESSIONS).flatMap(([tier, count]) =>
      Array.from({ length: count }, (_, i) => ({
        session: `agent-${tier}-${i}`,
        tier,
        agent: tier === "small" ? FLEET_AGENT : undefined,
      })),
    );
    const runTurns = (from: number, to: number): Promise<unknown> =>
      Promise.all(
        names.map(async ({ session, tier, agent }) => {
          for (let n = from; n < to; n++) await turn(session, tier, n, agent);
        }),
      );
    await turn(names[0]!.session, names[0]!.tier, 0, CAPPED_AGENT);
    await overBudget();
    await Promise.all(names.slice(1).map(({ session, tier, agent }) => turn(session, tier, 0, agent)));
    await runTurns(1, 2);
    await waitFor("the first phase in Prometheus", async () => {
      const [h, m, rejected] = await Promise.all([
        prom.scalar("sum(agentserve_affinity_hits_total)"),
        prom.scalar("sum(agentserve_affinity_misses_total)"),
        prom.scalar('sum(agentserve_rejections_total{reason="budget_exceeded"})'),
      ]);
      return h === names.length && m === names.length && rejected === 1;
    });
    await runTurns(2, TURNS);
    await overBudget();

    // Every session stayed on one engine, missed once and hit five times; every engine served sessions.
    const hits = [...sessions.values()].reduce((sum, s) => sum + s.hits.filter(Boolean).length, 0);
    const misses = [...sessions.values()].reduce((sum, s) => sum + s.hits.filter((h) => !h).length, 0);
    expect({ hits, misses }).toEqual({ hits: 5 * names.length, misses: names.length });
    for (const s of sessions.values()) expect(s.backends.size).toBe(1);
    const used = new Set([...sessions.values()].flatMap((s) => [...s.backends]));
    expect([...used].sort()).toEqual(shipped.backends.map((b) => b.id).sort());

    // 3. Wait (bounded, by polling the API) until Prometheus holds the final values of every source.
    const engineQueries = Object.fromEntries(
      [...cluster.engines].map(([id, engine]) => [id, engine.stats().prefixCacheQueries]),
    );
    await waitFor("the workload's final counters in Prometheus", async () => {
      const [h, m, rejected, requests, engines] = await Promise.all([
        prom.scalar("sum(agentserve_affinity_hits_total)"),
        prom.scalar("sum(agentserve_affinity_misses_total)"),
        prom.scalar('sum(agentserve_rejections_total{reason="budget_exceeded"})'),
        prom.scalar("sum(agentserve_requests_total)"),
        prom.query("sum by (backend) (vllm:prefix_cache_queries_total)"),
      ]);
      return (
        h === hits &&
        m === misses &&
        rejected === 2 &&
        requests === hits + misses + 2 &&
        Object.entries(engineQueries).every(([id, q]) => byLabel(engines, "backend")[id] === q)
      );
    });

    // 4. Every expression, with Grafana's variables replaced: the whole run (from before Prometheus'
    // first scrape to now) as $__rate_interval and $__range, "All" (.*) or one tier as $tier.
    const evalTime = Date.now() / 1000;
    const window = `${Math.ceil(evalTime - prom.startedAtMs / 1000) + 1}s`;
    const values = (tier: string): Record<string, string> => ({
      tier,
      __rate_interval: window,
      __range: window,
      __interval: `${SCRAPE_SECONDS}s`,
    });
    const queries = dashboardQueries(dashboard);
    expect(queries.length).toBeGreaterThan(20);
    const results = new Map<string, Sample[]>();
    for (const q of queries) {
      const expr = substituteVariables(q.expr, values(".*"));
      const samples = await prom.query(expr, evalTime).catch((err: unknown) => {
        throw new Error(`panel ${q.panelId} "${q.panelTitle}" ${q.refId}: ${String(err)}\n${expr}`);
      });
      expect(
        finite(samples).length,
        `panel ${q.panelId} "${q.panelTitle}" ${q.refId} has no data: ${expr}`,
      ).toBeGreaterThan(0);
      results.set(`${q.panelId}/${q.refId}`, samples);
    }
    const result = (panelId: number, refId = "A"): Sample[] => results.get(`${panelId}/${refId}`) ?? [];

    // The hit-rate panels: exactly 5/6 per tier, and over every tier.
    const fiveSixths = 5 / 6;
    for (const samples of [result(11), result(31, "A")]) {
      const perTier = byLabel(samples, "tier");
      expect(Object.keys(perTier).sort()).toEqual(["big", "small"]);
      for (const rate of Object.values(perTier)) expect(rate).toBeCloseTo(fiveSixths, 12);
    }
    expect(result(12)).toHaveLength(1);
    expect(result(12)[0]!.value).toBeCloseTo(fiveSixths, 12);
    // ... and with one tier selected.
    for (const tier of ["big", "small"]) {
      for (const q of queries.filter((q) => q.panelId === 11 || q.panelId === 12)) {
        const samples = await prom.query(substituteVariables(q.expr, values(tier)), evalTime);
        expect(samples).toHaveLength(1);
        expect(samples[0]!.value).toBeCloseTo(fiveSixths, 12);
      }
    }

    // The other panels show what the workload did.
    expect(byLabel(result(2), "status")).toMatchObject({
      "200": expect.any(Number),
      "429": expect.any(Number),
    });
    expect(Object.keys(byLabel(finite(result(4, "B")), "tier")).sort()).toEqual(["big", "small"]);
    expect(byLabel(result(13, "B"), "tier")).toEqual({ big: 0, small: 0 });
    expect(Object.keys(byLabel(result(14), "reason")).sort()).toEqual(["affinity_hit", "new_session"]);
    expect(byLabel(result(17), "reason")["budget_exceeded"]).toBeGreaterThan(0);
    expect(result(18)[0]!.value).toBeGreaterThan(0);
    expect(result(21).map((s) => s.value)).toEqual(shipped.backends.map(() => 1));
    expect(result(22).map((s) => s.value)).toEqual(Array.from({ length: expectedTargets }, () => 1));
    expect(byLabel(result(24), "tier")).toEqual({ big: SESSIONS["big"], small: SESSIONS["small"] });
    const enginePrefix = byLabel(result(31, "B"), "tier");
    expect(enginePrefix["big"]).toBeGreaterThan(0.5);
    expect(enginePrefix["small"]).toBeGreaterThan(0.5);
    for (const rate of Object.values(byLabel(result(31, "C"), "tier"))) expect(rate).toBeGreaterThan(0.5);
    expect(Object.keys(byLabel(finite(result(32)), "backend")).sort()).toEqual(
      shipped.backends.map((b) => b.id).sort(),
    );

    // The receipts row: every kind, every cause the turns were receipted with, and the whole-range share of
    // reusable tokens served equal to the gateway's own counters.
    expect(Object.keys(byLabel(result(41), "kind")).sort()).toEqual(["cached", "lost", "reusable"]);
    expect(Object.keys(byLabel(result(42), "cause"))).toContain("new_session");
    const own = await scrape(cluster.url);
    const receipted = (kind: string): number => metricValue(own, "agentserve_prefix_tokens_total", { kind });
    expect(receipted("reusable")).toBeGreaterThan(0);
    expect(result(43)[0]!.value).toBeCloseTo(1 - receipted("lost") / receipted("reusable"), 9);

    // The flow scheduling row. Every band's waiting gauge, nothing left waiting; the wait quantiles of the
    // bands requests went through (the default band, the fleet's), the fleet's waits above 0.
    expect(byLabel(result(51), "band")).toEqual({ "0": 0, "1": 0, "2": 0 });
    const p50 = byLabel(finite(result(52, "A")), "band");
    const p95 = byLabel(finite(result(52, "B")), "band");
    expect(Object.keys(p50).sort()).toEqual(["1", FLEET_BAND]);
    expect(Object.keys(p95).sort()).toEqual(["1", FLEET_BAND]);
    for (const band of Object.keys(p50)) expect(p95[band]).toBeGreaterThanOrEqual(p50[band]!);
    expect(p95[FLEET_BAND]).toBeGreaterThan(0);
    // Served tokens: exactly the workload's flows, the big-tier sessions by session, the agents by agent (the
    // capped agent's one turn, then its session's own); the fleet of 8 sessions served most.
    const served = byLabel(result(53), "flow");
    const bigSessions = names.filter((n) => n.agent === undefined).map((n) => `session:${n.session}`);
    expect(Object.keys(served).sort()).toEqual([CAPPED_AGENT, FLEET_AGENT, ...bigSessions].sort());
    for (const flow of [FLEET_AGENT, ...bigSessions]) expect(served[flow], flow).toBeGreaterThan(0);
    expect(Object.entries(served).sort((a, b) => b[1] - a[1])[0]![0]).toBe(FLEET_AGENT);
    // One gateway: one fairness index, of its six active flows, unequal (the fleet had 8 sessions' share).
    const activeFlows = 2 + bigSessions.length;
    expect(result(55).map((s) => s.value)).toEqual([activeFlows]);
    expect(result(54)).toHaveLength(1);
    expect(result(54)[0]!.value).toBeGreaterThanOrEqual(1 / activeFlows);
    expect(result(54)[0]!.value).toBeLessThan(1);

    // The $tier variable's own query, label_values(agentserve_affinity_hits_total, tier), as Grafana runs it.
    expect(await prom.labelValues("tier", "agentserve_affinity_hits_total")).toEqual(["big", "small"]);
  }, 120_000);
});
