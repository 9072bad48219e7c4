// The dashboard JSON is valid for the Grafana schemaVersion it declares, and the provisioning files load it
// with the datasource its panels name (the rules are listed in grafana-dashboard.ts).
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  DASHBOARD_FILE,
  DASHBOARD_PROVIDER_FILE,
  SCHEMA_VERSION,
  dashboardQueries,
  loadDashboard,
  provisionedDatasource,
  readJson,
  readYaml,
  repoFile,
  substituteVariables,
  validateDashboard,
  variableReferences,
} from "./grafana-dashboard.js";

const datasource = provisionedDatasource();

type Doc = Record<string, unknown> & { panels: Record<string, unknown>[] };
type QueryPanel = Record<string, unknown> & {
  targets: Record<string, unknown>[];
  gridPos: Record<string, number>;
};

/** A deep copy of the shipped dashboard document, changed by `edit`. */
function mutated(edit: (d: Doc) => void): unknown {
  const copy = structuredClone(readJson(DASHBOARD_FILE)) as Doc;
  edit(copy);
  return copy;
}

function firstQueryPanel(d: Doc): QueryPanel {
  return d.panels.find((p) => p["type"] !== "row") as QueryPanel;
}

describe("the Grafana dashboard", () => {
  it(`is valid for schemaVersion ${SCHEMA_VERSION}, with every panel on the provisioned datasource`, () => {
    const { problems } = validateDashboard(readJson(DASHBOARD_FILE), datasource.uid);
    expect(problems).toEqual([]);
  });

  it("has the four rows of the issue, the receipts row and the flow scheduling row, each with its panels", () => {
    const dashboard = loadDashboard(datasource.uid);
    const rows = dashboard.panels.filter((p) => p.type === "row").map((p) => p.title);
    expect(rows).toEqual([
      "Traffic and latency",
      "Scheduling",
      "Backends",
      "Engines (their own metrics)",
      "Cache reused vs lost by cause",
      "Flow scheduling",
    ]);
    const queries = dashboardQueries(dashboard);
    const exprs = queries.map((q) => q.expr).join("\n");
    for (const metric of [
      "agentserve_requests_total",
      "agentserve_request_duration_seconds_bucket",
      "agentserve_ttft_seconds_bucket",
      "agentserve_affinity_hits_total",
      "agentserve_affinity_misses_total",
      "agentserve_affinity_broken_total",
      "agentserve_retries_total",
      "agentserve_queue_depth",
      "agentserve_rejections_total",
      "agentserve_backend_up",
      "agentserve_backend_inflight",
      "agentserve_sticky_bindings",
      "agentserve_backend_bindings",
      "agentserve_backend_waiting_requests",
      "vllm:prefix_cache_hits_total",
      "vllm:prefix_cache_queries_total",
      "vllm:kv_cache_usage_perc",
      "agentserve_prefix_tokens_total",
      "agentserve_queue_waiting",
      "agentserve_queue_wait_seconds_bucket",
      "agentserve_flow_served_tokens_total",
      "agentserve_flow_fairness_index",
      "agentserve_flows_active",
    ]) {
      expect(exprs, metric).toContain(metric);
    }
    // The flow scheduling row, the last one, holds the five panels of issue 24.
    const flowRow = dashboard.panels.findIndex((p) => p.title === "Flow scheduling");
    expect(dashboard.panels.slice(flowRow + 1).map((p) => p.title)).toEqual([
      "Requests waiting per band",
      "Queue wait p50 / p95 per band",
      "Served tokens per flow (top 20)",
      "Jain fairness index over active flows",
      "Active flows",
    ]);
  });

  it.each<[string, (d: Doc) => void, string]>([
    [
      "a panel wider than the grid",
      (d) => {
        firstQueryPanel(d).gridPos["w"] = 25;
      },
      "gridPos.w: Too big",
    ],
    [
      "a panel past the 24th column",
      (d) => {
        firstQueryPanel(d).gridPos["x"] = 20;
      },
      "x + w must be at most 24",
    ],
    [
      "two panels on the same cells",
      (d) => {
        const panels = d.panels.filter((p) => p["type"] !== "row") as { gridPos: Record<string, number> }[];
        panels[1]!.gridPos = { ...panels[0]!.gridPos };
      },
      "overlaps panel",
    ],
    [
      "a duplicate panel id",
      (d) => {
        d.panels[2]!["id"] = d.panels[1]!["id"];
      },
      "duplicate panel id",
    ],
    [
      "a target without refId",
      (d) => {
        delete firstQueryPanel(d).targets[0]!["refId"];
      },
      "targets.0.refId: Invalid input",
    ],
    [
      "a target without expr",
      (d) => {
        delete firstQueryPanel(d).targets[0]!["expr"];
      },
      "targets.0.expr: Invalid input",
    ],
    [
      "a datasource named by a string (before schemaVersion 36)",
      (d) => {
        firstQueryPanel(d)["datasource"] = "Prometheus";
      },
      "datasource: Invalid input: expected object",
    ],
    [
      "a datasource uid that is not provisioned",
      (d) => {
        firstQueryPanel(d).targets[0]!["datasource"] = { type: "prometheus", uid: "elsewhere" };
      },
      "is not the provisioned",
    ],
    [
      "an undefined variable",
      (d) => {
        firstQueryPanel(d).targets[0]!["expr"] = 'up{job="$job"}';
      },
      "uses $job",
    ],
    [
      "an unknown panel type",
      (d) => {
        firstQueryPanel(d)["type"] = "graph2";
      },
      "type: Invalid discriminator",
    ],
    [
      "a row that is not a full-width bar",
      (d) => {
        d.panels[0]!["gridPos"] = { h: 8, w: 12, x: 0, y: 0 };
      },
      "a row spans the grid",
    ],
    [
      "another schemaVersion",
      (d) => {
        d["schemaVersion"] = 27;
      },
      "schemaVersion: Invalid input: expected 39",
    ],
    [
      "timeseries options without showLegend",
      (d) => {
        const options = firstQueryPanel(d)["options"] as { legend: Record<string, unknown> };
        delete options.legend["showLegend"];
      },
      "options.legend.showLegend",
    ],
  ])("rejects %s", (_what, edit, problem) => {
    const { problems } = validateDashboard(mutated(edit), datasource.uid);
    expect(problems.join("\n")).toContain(problem);
  });

  it("finds and replaces Grafana's variable syntaxes", () => {
    expect(variableReferences('rate(x{tier=~"$tier",b="${b:regex}"}[$__rate_interval]) [[c]]')).toEqual([
      "tier",
      "b",
      "__rate_interval",
      "c",
    ]);
    expect(
      substituteVariables('rate(x{tier=~"${tier}"}[$__rate_interval])', {
        tier: ".*",
        __rate_interval: "1m",
      }),
    ).toBe('rate(x{tier=~".*"}[1m])');
    expect(() => substituteVariables("rate(x[$__range])", {})).toThrow(/no test value/);
  });
});

describe("the Grafana provisioning", () => {
  it("provisions the Prometheus of configs/prometheus.yml under the uid the dashboard uses", () => {
    const prometheus = readYaml(repoFile("configs/prometheus.yml")) as {
      global: { scrape_interval: string };
    };
    expect(datasource.timeInterval).toBe(prometheus.global.scrape_interval);
    expect(new URL(datasource.url).port).toBe("9090");
  });

  it("loads the dashboards folder from the path docs/observability.md mounts", () => {
    const provider = readYaml(DASHBOARD_PROVIDER_FILE) as {
      apiVersion: number;
      providers: { name: string; type: string; options: { path: string } }[];
    };
    expect(provider.apiVersion).toBe(1);
    expect(provider.providers).toHaveLength(1);
    const [entry] = provider.providers;
    expect(entry!.type).toBe("file");
    expect(entry!.options.path.startsWith("/")).toBe(true);
    const docs = readFileSync(repoFile("docs/observability.md"), "utf8");
    expect(docs).toContain(`configs/grafana/dashboards:${entry!.options.path}`);
    expect(docs).toContain("configs/grafana/provisioning:/etc/grafana/provisioning");
  });

  it("is documented: docs/observability.md shows every expression of the dashboard", () => {
    const docs = readFileSync(repoFile("docs/observability.md"), "utf8");
    const missing = dashboardQueries(loadDashboard(datasource.uid))
      .filter((q) => !docs.includes(q.expr))
      .map((q) => `panel ${q.panelId} ${q.refId}: ${q.expr}`);
    expect(missing).toEqual([]);
  });
});
