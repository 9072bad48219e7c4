// The placement policies the hotspot and sessionless studies put side by side, each as a gateway config.
import type { Chart, Check } from "./result.js";
import { barChart } from "./svg-charts.js";
import type { RequestRecord } from "./session-runner.js";

export interface StudyPolicy {
  name: string;
  label: string;
  /** The config's affinity section for this policy (over the defaults). */
  affinity: Record<string, unknown>;
  /** false: the client sends no X-Session-Id (prefix placement places every request). */
  sendSessionIds: boolean;
}

const RR: StudyPolicy = {
  name: "round_robin",
  label: "round-robin (TTL 0)",
  affinity: { sticky_ttl_seconds: 0, balancer: "round_robin" },
  sendSessionIds: true,
};
const LEAST: StudyPolicy = {
  name: "least_loaded",
  label: "least-loaded (TTL 0)",
  affinity: { sticky_ttl_seconds: 0, balancer: "least_inflight" },
  sendSessionIds: true,
};
const SGLANG: StudyPolicy = {
  name: "sglang",
  label: "SGLang cache-aware",
  affinity: { policy: "sglang_cache_aware" },
  sendSessionIds: true,
};
const LLMD: StudyPolicy = {
  name: "llmd",
  label: "llm-d scorers 3:2:2",
  affinity: { policy: "llmd_scorers" },
  sendSessionIds: true,
};

/** Agent sessions: affinity plain and bounded, prefix placement without session ids, and the rest. */
export const SESSION_POLICIES: StudyPolicy[] = [
  RR,
  LEAST,
  {
    name: "plain",
    label: "plain affinity (load_factor 0)",
    affinity: { load_factor: 0 },
    sendSessionIds: true,
  },
  {
    name: "bounded",
    label: "bounded-load affinity (1.25)",
    affinity: { load_factor: 1.25 },
    sendSessionIds: true,
  },
  {
    name: "prefix",
    label: "prefix placement (no session ids)",
    affinity: { load_factor: 1.25, sessionless: "prefix" },
    sendSessionIds: false,
  },
  SGLANG,
  LLMD,
];

/** Requests without session ids: the balancers, prefix placement plain and bounded, and the two routers. */
export const SESSIONLESS_POLICIES: StudyPolicy[] = [
  RR,
  {
    ...LEAST,
    affinity: { sessionless: "balancer", balancer: "least_inflight" },
    label: "least-loaded (sessionless: balancer)",
  },
  {
    name: "plain",
    label: "prefix, plain (load_factor 0)",
    affinity: { load_factor: 0, sessionless: "prefix" },
    sendSessionIds: false,
  },
  {
    name: "bounded",
    label: "prefix, bounded (1.25)",
    affinity: { load_factor: 1.25, sessionless: "prefix" },
    sendSessionIds: false,
  },
  SGLANG,
  LLMD,
];

/**
 * Engine readings every 50 ms of wall time (llm-d's endpoint picker refreshes its metrics every 50 ms by
 * default): the llm-d policy's KV and waiting-queue scores, and every policy's gauges, stay current.
 */
export const STUDY_HEALTH = { engine_metrics_interval_seconds: 0.05 };

/** What one (workload, policy) condition of a placement study returns. */
export interface ConditionRun<R> {
  result: R;
  records: RequestRecord[];
}

/**
 * Runs every policy on every workload, in order (the same seeds for each), and checks that no request failed.
 * Both placement studies share this; what one condition does is theirs.
 */
export async function runPolicyMatrix<W extends { name: string }, R extends MatrixResult>(
  workloads: readonly W[],
  policies: readonly StudyPolicy[],
  runCondition: (workload: W, policy: StudyPolicy) => Promise<ConditionRun<R>>,
): Promise<{ byWorkload: Map<string, R[]>; records: RequestRecord[]; checks: Check[] }> {
  const records: RequestRecord[] = [];
  const byWorkload = new Map<string, R[]>();
  for (const workload of workloads) {
    const results: R[] = [];
    for (const policy of policies) {
      const run = await runCondition(workload, policy);
      records.push(...run.records);
      results.push(run.result);
    }
    byWorkload.set(workload.name, results);
  }
  const checks: Check[] = [...byWorkload.values()].flat().map((r) => ({
    claim: `${r.workload}/${r.policy}: no failed request`,
    passed: r.failed === 0,
    detail: `${r.failed}/${r.requests}`,
  }));
  return { byWorkload, records, checks };
}

interface MatrixResult {
  workload: string;
  policy: string;
  failed: number;
  requests: number;
}

/** The engines' prefix-cache hit rate per policy and workload, as both placement studies chart it. */
export function cacheChart(
  file: string,
  workloads: readonly { name: string }[],
  policies: readonly StudyPolicy[],
  byWorkload: ReadonlyMap<string, readonly (MatrixResult & { prefixCacheHitRate: number })[]>,
): Chart {
  return {
    file,
    caption: "Engine prefix-cache hit rate per policy and workload",
    svg: barChart({
      title: "Prefix-cache hit rate per policy",
      yLabel: "% of prompt tokens cached",
      series: workloads.map((w) => w.name),
      groups: policies.map((p) => ({
        label: p.label,
        values: workloads.map(
          (w) =>
            ((byWorkload.get(w.name) ?? []).find((r) => r.policy === p.name)?.prefixCacheHitRate ??
              Number.NaN) * 100,
        ),
      })),
      yMax: 100,
    }),
  };
}
