// The shipped Grafana dashboard as the tests see it: the structural rules of the schemaVersion it declares,
// its PromQL queries, and how Grafana's variables are replaced by concrete values before evaluation.
//
// There is no Grafana here, so the rules are those of Grafana's classic dashboard model (the CUE kind
// kinds/dashboard/dashboard_kind.cue and the migrations up to schemaVersion 39, Grafana 10.4/11.0):
// - GridPos: h > 0; 0 < w <= 24; 0 <= x < 24; y >= 0; the grid is 24 columns wide (x + w <= 24).
// - Panel: non-empty plugin `type`; uint32 `id`; `options` and `fieldConfig {defaults, overrides}`;
//   `targets` are datasource queries with a `refId`; since schemaVersion 36 every datasource is a reference
//   object {type, uid}, never a name string or null.
// - RowPanel: type "row", `collapsed`, an `id`, `panels` (its children only while collapsed; an expanded
//   row's panels follow it in the top-level list, below it).
// - Variables: `type` one of query|adhoc|constant|datasource|interval|textbox|custom|system, a `name`,
//   `hide` 0|1|2; a query variable has a datasource, a query and refresh 1 (on load) or 2 (on time change).
// - Dashboard: graphTooltip 0|1|2, fiscalYearStartMonth 0-11, refresh an interval string or false.
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parse as parseYaml } from "yaml";
import { z } from "zod";

/** A file of the repository, by its path from the root. */
export function repoFile(path: string): string {
  return fileURLToPath(new URL(`../../${path}`, import.meta.url));
}

export const DASHBOARD_FILE = repoFile("configs/grafana/dashboards/agent-serve.json");
export const DATASOURCE_FILE = repoFile("configs/grafana/provisioning/datasources/prometheus.yml");
export const DASHBOARD_PROVIDER_FILE = repoFile("configs/grafana/provisioning/dashboards/agent-serve.yml");
export const SCHEMA_VERSION = 39;

/** Core panel plugins of Grafana 10.4/11 (the `type` of a panel). */
export const CORE_PANEL_TYPES = [
  "alertlist",
  "annolist",
  "barchart",
  "bargauge",
  "candlestick",
  "canvas",
  "dashlist",
  "datagrid",
  "flamegraph",
  "gauge",
  "geomap",
  "heatmap",
  "histogram",
  "logs",
  "news",
  "nodeGraph",
  "piechart",
  "stat",
  "state-timeline",
  "status-history",
  "table",
  "text",
  "timeseries",
  "traces",
  "trend",
  "xychart",
] as const;

/** Grafana's built-in variables ($__rate_interval and friends), valid in any query. */
export const BUILTIN_VARIABLES = new Set([
  "__interval",
  "__interval_ms",
  "__rate_interval",
  "__rate_interval_ms",
  "__range",
  "__range_s",
  "__range_ms",
  "__from",
  "__to",
  "__dashboard",
  "__org",
  "__user",
]);

/** Unit ids of Grafana's value formats that this dashboard may use. */
const UNITS = ["short", "none", "percent", "percentunit", "s", "ms", "reqps", "ops", "bytes", "decbytes"];

const uint32 = z.number().int().min(0).max(0xffffffff);
const dataSourceRef = z.strictObject({ type: z.string().min(1), uid: z.string().min(1) });

const gridPos = z
  .strictObject({
    h: z.number().int().positive(),
    w: z.number().int().positive().max(24),
    x: z.number().int().min(0).max(23),
    y: z.number().int().min(0),
    static: z.boolean().optional(),
  })
  .refine((g) => g.x + g.w <= 24, { message: "x + w must be at most 24 (the grid is 24 columns wide)" });

const target = z.strictObject({
  refId: z.string().min(1),
  datasource: dataSourceRef,
  expr: z.string().min(1),
  legendFormat: z.string().optional(),
  instant: z.boolean().optional(),
  range: z.boolean().optional(),
  editorMode: z.enum(["code", "builder"]).optional(),
  format: z.enum(["time_series", "table", "heatmap"]).optional(),
  interval: z.string().optional(),
  hide: z.boolean().optional(),
});

const thresholds = z.strictObject({
  mode: z.enum(["absolute", "percentage"]),
  steps: z
    .array(z.strictObject({ color: z.string().min(1), value: z.number().nullable() }))
    .min(1)
    .refine((steps) => steps[0]?.value === null, {
      message: "the first threshold step is the base (-Infinity, serialised as null)",
    })
    .refine(
      (steps) => steps.slice(1).every((s, i) => s.value !== null && (i === 0 || s.value > steps[i]!.value!)),
      {
        message: "threshold steps after the base must have increasing numeric values",
      },
    ),
});

const valueMapping = z.strictObject({
  type: z.enum(["value", "range", "regex", "special"]),
  options: z.record(z.string(), z.unknown()),
});

const fieldConfig = z.strictObject({
  defaults: z.strictObject({
    unit: z.enum(UNITS).optional(),
    decimals: z.number().int().min(0).optional(),
    min: z.number().optional(),
    max: z.number().optional(),
    displayName: z.string().optional(),
    noValue: z.string().optional(),
    color: z
      .strictObject({
        mode: z.enum(["thresholds", "palette-classic", "palette-saturated", "continuous-GrYlRd", "fixed"]),
        fixedColor: z.string().optional(),
        seriesBy: z.enum(["min", "max", "last"]).optional(),
      })
      .optional(),
    thresholds: thresholds.optional(),
    mappings: z.array(valueMapping).optional(),
    custom: z.record(z.string(), z.unknown()).optional(),
  }),
  overrides: z.array(
    z.strictObject({
      matcher: z.strictObject({ id: z.string(), options: z.unknown().optional() }),
      properties: z.array(z.strictObject({ id: z.string(), value: z.unknown().optional() })),
    }),
  ),
});

/** Options of the panel types the dashboard uses (schemaVersion 37 moved legend visibility to showLegend). */
const panelOptions: Partial<Record<(typeof CORE_PANEL_TYPES)[number], z.ZodType>> = {
  timeseries: z.strictObject({
    legend: z.strictObject({
      showLegend: z.boolean(),
      displayMode: z.enum(["list", "table", "hidden"]),
      placement: z.enum(["bottom", "right"]),
      calcs: z.array(z.string()),
    }),
    tooltip: z.strictObject({
      mode: z.enum(["single", "multi", "none"]),
      sort: z.enum(["none", "asc", "desc"]),
    }),
  }),
  stat: z.strictObject({
    reduceOptions: z.strictObject({
      calcs: z.array(z.string()).min(1),
      fields: z.string(),
      values: z.boolean(),
    }),
    colorMode: z.enum(["value", "background", "background_solid", "none"]),
    graphMode: z.enum(["none", "area"]),
    justifyMode: z.enum(["auto", "center"]),
    orientation: z.enum(["auto", "horizontal", "vertical"]),
    textMode: z.enum(["auto", "value", "value_and_name", "name", "none"]),
  }),
};

const panel = z
  .strictObject({
    type: z.enum(CORE_PANEL_TYPES),
    id: uint32.positive(),
    title: z.string().min(1),
    description: z.string().optional(),
    gridPos,
    datasource: dataSourceRef,
    targets: z.array(target).min(1),
    fieldConfig,
    options: z.record(z.string(), z.unknown()),
    transformations: z.array(z.strictObject({ id: z.string(), options: z.unknown() })).optional(),
    transparent: z.boolean().optional(),
    interval: z.string().optional(),
    maxDataPoints: z.number().optional(),
    pluginVersion: z.string().optional(),
  })
  .superRefine((p, ctx) => {
    const refIds = p.targets.map((t) => t.refId);
    if (new Set(refIds).size !== refIds.length)
      ctx.addIssue({ code: "custom", path: ["targets"], message: `duplicate refId in ${refIds.join(",")}` });
    const schema = panelOptions[p.type];
    if (schema === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["type"],
        message: `no option rules for '${p.type}' yet: add them`,
      });
      return;
    }
    const result = schema.safeParse(p.options);
    if (!result.success)
      for (const issue of result.error.issues)
        ctx.addIssue({ code: "custom", path: ["options", ...issue.path], message: issue.message });
  });

const rowPanel = z.strictObject({
  type: z.literal("row"),
  id: uint32.positive(),
  title: z.string().min(1),
  collapsed: z.boolean(),
  gridPos: gridPos.refine((g) => g.h === 1 && g.w === 24 && g.x === 0, {
    message: "a row spans the grid: x 0, w 24, h 1",
  }),
  datasource: dataSourceRef.optional(),
  panels: z.array(panel),
  repeat: z.string().optional(),
});

const variable = z
  .strictObject({
    type: z.enum(["query", "adhoc", "constant", "datasource", "interval", "textbox", "custom", "system"]),
    name: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/),
    label: z.string().optional(),
    description: z.string().optional(),
    hide: z.union([z.literal(0), z.literal(1), z.literal(2)]),
    skipUrlSync: z.boolean(),
    datasource: dataSourceRef.optional(),
    definition: z.string().optional(),
    query: z.union([z.string(), z.record(z.string(), z.unknown())]).optional(),
    refresh: z.union([z.literal(0), z.literal(1), z.literal(2)]).optional(),
    regex: z.string().optional(),
    sort: z.number().int().min(0).max(8).optional(),
    includeAll: z.boolean().optional(),
    allValue: z.string().optional(),
    multi: z.boolean().optional(),
    current: z
      .strictObject({
        selected: z.boolean().optional(),
        text: z.union([z.string(), z.array(z.string())]),
        value: z.union([z.string(), z.array(z.string())]),
      })
      .optional(),
    options: z.array(z.unknown()).optional(),
  })
  .superRefine((v, ctx) => {
    if (v.type !== "query") return;
    if (v.datasource === undefined)
      ctx.addIssue({ code: "custom", path: ["datasource"], message: "required" });
    const query = typeof v.query === "string" ? v.query : v.query?.["query"];
    if (typeof query !== "string" || query === "")
      ctx.addIssue({ code: "custom", path: ["query"], message: "a query variable needs a query" });
    if (v.refresh !== 1 && v.refresh !== 2)
      ctx.addIssue({
        code: "custom",
        path: ["refresh"],
        message: "a query variable refreshes on load (1) or time change (2)",
      });
  });

const annotation = z.strictObject({
  builtIn: z.number().optional(),
  name: z.string().min(1),
  datasource: dataSourceRef,
  enable: z.boolean(),
  hide: z.boolean().optional(),
  iconColor: z.string().min(1),
  type: z.string().optional(),
});

const dashboardObject = z.strictObject({
  id: z.number().int().nullable().optional(),
  uid: z.string().regex(/^[A-Za-z0-9_-]{1,40}$/),
  title: z.string().min(1),
  description: z.string().optional(),
  tags: z.array(z.string()),
  timezone: z.string(),
  editable: z.boolean(),
  graphTooltip: z.union([z.literal(0), z.literal(1), z.literal(2)]),
  time: z.strictObject({ from: z.string().min(1), to: z.string().min(1) }),
  timepicker: z.record(z.string(), z.unknown()),
  fiscalYearStartMonth: z.number().int().min(0).max(11),
  liveNow: z.boolean().optional(),
  weekStart: z.string().optional(),
  refresh: z.union([z.string().regex(/^\d+(ms|s|m|h|d)$/), z.literal(false), z.literal("")]),
  schemaVersion: z.literal(SCHEMA_VERSION),
  version: uint32.optional(),
  links: z.array(z.unknown()),
  panels: z.array(z.discriminatedUnion("type", [rowPanel, panel])).min(1),
  templating: z.strictObject({ list: z.array(variable) }),
  annotations: z.strictObject({ list: z.array(annotation) }),
});

export type Dashboard = z.output<typeof dashboardObject>;

function dashboardSchema(datasourceUid: string): z.ZodType<Dashboard> {
  return dashboardObject.superRefine((d, ctx) => checkDashboard(d, datasourceUid, ctx));
}
export type DashboardPanel = z.output<typeof panel>;
type RowPanel = z.output<typeof rowPanel>;
type Ctx = z.RefinementCtx;

function isRow(p: DashboardPanel | RowPanel): p is RowPanel {
  return p.type === "row";
}

/** Rules across panels: unique ids, no overlap, rows own the panels below them, datasources, variables. */
function checkDashboard(d: Pick<Dashboard, "panels" | "templating">, datasourceUid: string, ctx: Ctx): void {
  const issue = (path: PropertyKey[], message: string): void =>
    ctx.addIssue({ code: "custom", path, message });
  const seen = new Set<number>();
  const all = d.panels.flatMap((p, i) => [
    { p, path: ["panels", i] as PropertyKey[] },
    ...(isRow(p)
      ? p.panels.map((c, j) => ({ p: c as DashboardPanel | RowPanel, path: ["panels", i, "panels", j] }))
      : []),
  ]);
  for (const { p, path } of all) {
    if (seen.has(p.id)) issue([...path, "id"], `duplicate panel id ${p.id}`);
    seen.add(p.id);
    if (isRow(p)) {
      if (!p.collapsed && p.panels.length > 0)
        issue(
          [...path, "panels"],
          "an expanded row lists no children: its panels follow it at the top level",
        );
      continue;
    }
    for (const [k, t] of p.targets.entries()) {
      if (t.datasource.uid !== datasourceUid)
        issue(
          [...path, "targets", k, "datasource"],
          `uid '${t.datasource.uid}' is not the provisioned '${datasourceUid}'`,
        );
      for (const name of variableReferences(t.expr)) {
        if (!BUILTIN_VARIABLES.has(name) && !d.templating.list.some((v) => v.name === name))
          issue(
            [...path, "targets", k, "expr"],
            `uses $${name}, which is neither a dashboard nor a built-in variable`,
          );
      }
    }
    if (p.datasource.uid !== datasourceUid)
      issue([...path, "datasource"], `uid '${p.datasource.uid}' is not the provisioned '${datasourceUid}'`);
  }
  // Top-level layout: sorted by (y, x), no two panels overlap, every panel sits below a row.
  const top = d.panels;
  for (let i = 1; i < top.length; i++) {
    const a = top[i - 1]!.gridPos;
    const b = top[i]!.gridPos;
    if (b.y < a.y || (b.y === a.y && b.x < a.x))
      issue(["panels", i, "gridPos"], "panels are not in (y, x) order");
  }
  for (let i = 0; i < top.length; i++) {
    for (let j = i + 1; j < top.length; j++) {
      const a = top[i]!.gridPos;
      const b = top[j]!.gridPos;
      if (a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h)
        issue(["panels", j, "gridPos"], `overlaps panel ${top[i]!.id}`);
    }
  }
  if (top[0] !== undefined && !isRow(top[0])) issue(["panels", 0], "the dashboard starts with a row");
  const names = d.templating.list.map((v) => v.name);
  if (new Set(names).size !== names.length) issue(["templating", "list"], "duplicate variable names");
  for (const [i, v] of d.templating.list.entries()) {
    if (v.datasource !== undefined && v.datasource.uid !== datasourceUid)
      issue(["templating", "list", i, "datasource"], `uid '${v.datasource.uid}' is not '${datasourceUid}'`);
  }
}

/** Names of the variables an expression uses: $name, ${name}, ${name:format}, [[name]], [[name:format]]. */
export function variableReferences(expr: string): string[] {
  const names = new Set<string>();
  for (const m of expr.matchAll(/\$\{(\w+)(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)(?::[^\]]*)?\]\]/g))
    names.add(m[1] ?? m[2] ?? m[3]!);
  return [...names];
}

/**
 * Replaces every variable by a concrete value, the way Grafana interpolates a Prometheus query: the tests
 * use the whole workload as `$__rate_interval` and `$__range`, and `.*` (Grafana's "All" with allValue .*)
 * or one tier for `$tier`. Throws when a variable has no value, so nothing reaches Prometheus unreplaced.
 */
export function substituteVariables(expr: string, values: Record<string, string>): string {
  const out = expr.replace(
    /\$\{(\w+)(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)(?::[^\]]*)?\]\]/g,
    (match, a?: string, b?: string, c?: string) => {
      const name = a ?? b ?? c ?? "";
      const value = values[name];
      if (value === undefined) throw new Error(`no test value for ${match} in ${expr}`);
      return value;
    },
  );
  return out;
}

export interface DashboardQuery {
  panelId: number;
  panelTitle: string;
  panelType: string;
  refId: string;
  expr: string;
  instant: boolean;
}

/** Every query of every panel (rows' collapsed children included), in dashboard order. */
export function dashboardQueries(d: Dashboard): DashboardQuery[] {
  const panels = d.panels.flatMap((p) => (isRow(p) ? p.panels : [p]));
  return panels.flatMap((p) =>
    p.targets.map((t) => ({
      panelId: p.id,
      panelTitle: p.title,
      panelType: p.type,
      refId: t.refId,
      expr: t.expr,
      instant: t.instant === true,
    })),
  );
}

/** Parses and validates a dashboard document; the problems are listed one a line. */
export function validateDashboard(
  document: unknown,
  datasourceUid: string,
): { dashboard: Dashboard; problems: [] } | { dashboard: undefined; problems: string[] } {
  const result = dashboardSchema(datasourceUid).safeParse(document);
  if (result.success) return { dashboard: result.data, problems: [] };
  return {
    dashboard: undefined,
    problems: result.error.issues.map((i) => `${i.path.map(String).join(".")}: ${i.message}`),
  };
}

export function readJson(path: string): unknown {
  return JSON.parse(readFileSync(path, "utf8")) as unknown;
}

/** The shipped dashboard, validated (throws with every problem when it is not valid). */
export function loadDashboard(datasourceUid: string): Dashboard {
  const { dashboard, problems } = validateDashboard(readJson(DASHBOARD_FILE), datasourceUid);
  if (dashboard === undefined) throw new Error(`${DASHBOARD_FILE} is not valid:\n${problems.join("\n")}`);
  return dashboard;
}

export function readYaml(path: string): unknown {
  return parseYaml(readFileSync(path, "utf8")) as unknown;
}

/** The provisioned Prometheus datasource (uid, url, scrape interval as Grafana's timeInterval). */
export function provisionedDatasource(): { uid: string; url: string; timeInterval: string } {
  const doc = z
    .object({
      apiVersion: z.literal(1),
      datasources: z
        .array(
          z.object({
            name: z.string().min(1),
            uid: z.string().regex(/^[A-Za-z0-9_-]{1,40}$/),
            type: z.literal("prometheus"),
            access: z.literal("proxy"),
            url: z.url(),
            jsonData: z.object({ timeInterval: z.string().regex(/^\d+(ms|s|m|h)$/) }),
          }),
        )
        .length(1),
    })
    .parse(readYaml(DATASOURCE_FILE));
  const ds = doc.datasources[0]!;
  return { uid: ds.uid, url: ds.url, timeInterval: ds.jsonData.timeInterval };
}
