// Placement of requests without a session id: N agent templates (long shared system prompts) under six policies.
import { SeededRandom } from "../../core/random.js";
import { pct, sec } from "../analysis.js";
import { StudyEnvironment, externalTarget, type EngineSpec, type StudyTarget } from "../environment.js";
import { runSessionless, type SessionlessRequest } from "../fanout-runner.js";
import { placementNumbers, reasonsText, type PlacementNumbers } from "../placement-numbers.js";
import {
  cacheChart,
  runPolicyMatrix,
  SESSIONLESS_POLICIES,
  STUDY_HEALTH,
  type StudyPolicy,
} from "../placement-policies.js";
import type { StudyOptions } from "../progress.js";
import type { Chart, StudyResult, Table } from "../result.js";
import type { RequestRecord } from "../session-runner.js";
import { ratio } from "../stats.js";
import { barChart } from "../svg-charts.js";
import { prose } from "../workload.js";
import { zipfLengths } from "./hotspot.js";

const MAX_INFLIGHT = 8;

const FOUR_7B: EngineSpec[] = [0, 1, 2, 3].map((i) => ({
  id: `small-${i}`,
  tier: "small",
  profile: "qwen2.5-7b",
  model: "Qwen/Qwen2.5-7B-Instruct",
  maxInflight: MAX_INFLIGHT,
}));

interface Workload {
  name: string;
  label: string;
  requests: SessionlessRequest[];
  concurrency: number;
}

function templatePrompt(random: SeededRandom, index: number): string {
  const tools = Array.from({ length: 6 }, (_, t) => `- tool_${index}_${t}(args): ${prose(random, 120)}`).join(
    "\n",
  );
  return `You are agent template ${index}. Follow the playbook and use the tools.\nTools:\n${tools}\nPlaybook: ${prose(random, 3000)}`;
}

/** `perTemplate[i]` requests of template i, in a seeded shuffled order, each with its own user message. */
function requestsFor(seed: number, perTemplate: number[]): SessionlessRequest[] {
  const random = new SeededRandom(seed);
  const prompts = perTemplate.map((_, i) => templatePrompt(random, i));
  const requests: SessionlessRequest[] = [];
  perTemplate.forEach((count, i) => {
    for (let r = 0; r < count; r++)
      requests.push({
        template: `template-${i}`,
        systemPrompt: prompts[i]!,
        userMessage: prose(random, 300),
        maxTokens: 64,
      });
  });
  for (let i = requests.length - 1; i > 0; i--) {
    const j = random.int(i + 1);
    [requests[i], requests[j]] = [requests[j]!, requests[i]!];
  }
  return requests;
}

function workloads(options: StudyOptions): Workload[] {
  const q = options.quick;
  const uniformTemplates = 6;
  const zipfTemplates = q ? 6 : 12;
  // Zipf popularity: template k gets a share ~ 1/k^1.2 of the requests.
  const zipfTotal = q ? 24 : 96;
  const counts = new Array<number>(zipfTemplates).fill(0);
  for (const k of zipfLengths(options.seed + 3, zipfTotal, zipfTemplates)) counts[k - 1]!++;
  return [
    {
      name: "templates",
      label: `${uniformTemplates} templates x ${q ? 4 : 12} requests, ${q ? 4 : 8} at a time`,
      requests: requestsFor(options.seed, new Array<number>(uniformTemplates).fill(q ? 4 : 12)),
      concurrency: q ? 4 : 8,
    },
    {
      name: "zipf",
      label: `${zipfTemplates} templates of Zipf popularity (${counts.join("/")} requests), ${q ? 8 : 16} at a time`,
      requests: requestsFor(options.seed + 1, counts),
      concurrency: q ? 8 : 16,
    },
  ];
}

interface ConditionResult extends PlacementNumbers {
  workload: string;
  policy: string;
  label: string;
  /** Cached / prompt tokens over each template's requests after its first. */
  warmCacheHitRate: number;
  /** Distinct engines a template's requests went to, averaged over the templates. */
  enginesPerTemplate: number;
}

async function runCondition(
  options: StudyOptions,
  workload: Workload,
  policy: StudyPolicy,
  configs: unknown[],
): Promise<{ result: ConditionResult; records: RequestRecord[] }> {
  const target: StudyTarget =
    options.gatewayUrl !== undefined
      ? externalTarget(options.gatewayUrl)
      : await StudyEnvironment.start({
          engines: FOUR_7B,
          config: { affinity: policy.affinity, health: STUDY_HEALTH },
          timeScale: options.timeScale,
          seed: options.seed,
        });
  if (target instanceof StudyEnvironment) {
    configs.push(target.config);
    await target.warmConnections(workload.concurrency, "small");
  }
  const condition = `${workload.name}:${policy.name}`;
  options.progress.start(condition, workload.requests.length);
  try {
    const started = performance.now();
    const records = await runSessionless(condition, workload.requests, workload.concurrency, target, {
      now: () => performance.now() - started,
      onRecord: (r) => options.progress.tick(!r.ok),
    });
    options.progress.done();
    const ok = records.filter((r) => r.ok && r.status === 200);
    const warm = ok.filter((r) => r.turn > 1);
    const engines = new Map<string, Set<string>>();
    for (const r of ok) {
      if (!engines.has(r.sessionId)) engines.set(r.sessionId, new Set());
      engines.get(r.sessionId)!.add(r.backend ?? "");
    }
    const spread = [...engines.values()].map((s) => s.size);
    return {
      records,
      result: {
        ...placementNumbers(records, target.timeScale),
        workload: workload.name,
        policy: policy.name,
        label: policy.label,
        warmCacheHitRate: ratio(
          warm.reduce((n, r) => n + r.cachedTokens, 0),
          warm.reduce((n, r) => n + r.promptTokens, 0),
        ),
        enginesPerTemplate: spread.length === 0 ? 0 : spread.reduce((a, b) => a + b, 0) / spread.length,
      },
    };
  } finally {
    await target.close();
  }
}

function tableFor(workload: Workload, results: ConditionResult[]): Table {
  return {
    title: `${workload.label} (latencies in simulated seconds)`,
    columns: [
      "policy",
      "requests",
      "failed",
      "TTFT p50",
      "TTFT p99",
      "E2E p50",
      "E2E p99",
      "prefix-cache hit rate",
      "after each template's first",
      "engines per template",
      "tokens/s",
      "placed by",
    ],
    rows: results.map((r) => [
      r.label,
      r.requests,
      r.failed,
      sec(r.ttftP50Seconds),
      sec(r.ttftP99Seconds),
      sec(r.e2eP50Seconds),
      sec(r.e2eP99Seconds),
      pct(r.prefixCacheHitRate),
      pct(r.warmCacheHitRate),
      r.enginesPerTemplate.toFixed(2),
      r.throughputTokensPerSecond.toFixed(0),
      reasonsText(r.reasons),
    ]),
  };
}

export async function runSessionlessStudy(options: StudyOptions): Promise<StudyResult> {
  const policies =
    options.gatewayUrl === undefined
      ? SESSIONLESS_POLICIES
      : [{ ...SESSIONLESS_POLICIES[3]!, label: "the running gateway's policy" }];
  const configs: unknown[] = [];
  const loads = workloads(options);
  const { byWorkload, records, checks } = await runPolicyMatrix(loads, policies, (workload, policy) =>
    runCondition(options, workload, policy, configs),
  );
  const all = [...byWorkload.values()].flat();
  const templates = byWorkload.get("templates") ?? [];
  const bounded = templates.find((r) => r.policy === "bounded");
  const balancer = templates.find((r) => r.policy === "least_loaded");
  if (bounded !== undefined) {
    checks.push({
      claim:
        "goal: templates: prefix placement serves at least 90% of prompt tokens from cache after each template's first request",
      passed: bounded.warmCacheHitRate >= 0.9,
      detail: pct(bounded.warmCacheHitRate),
    });
    if (balancer !== undefined)
      checks.push({
        claim: "goal: templates: prefix placement caches more prompt tokens than the least-loaded balancer",
        passed: bounded.prefixCacheHitRate > balancer.prefixCacheHitRate,
        detail: `${pct(bounded.prefixCacheHitRate)} vs ${pct(balancer.prefixCacheHitRate)}`,
      });
  }
  const tables = loads.map((w) => tableFor(w, byWorkload.get(w.name) ?? []));
  const charts: Chart[] = loads.map((w) => ({
    file: `sessionless-${w.name}.svg`,
    caption: `TTFT p50 and p99 (simulated seconds) per policy, ${w.name} workload`,
    svg: barChart({
      title: `TTFT per policy: ${w.name}`,
      yLabel: "seconds (simulated)",
      series: ["TTFT p50", "TTFT p99"],
      groups: (byWorkload.get(w.name) ?? []).map((r) => ({
        label: r.label,
        values: [r.ttftP50Seconds, r.ttftP99Seconds],
      })),
      valueFormat: (v: number) => v.toFixed(2),
    }),
  }));
  charts.push(cacheChart("sessionless-cache.svg", loads, policies, byWorkload));
  return {
    study: "sessionless",
    title: "Requests without session ids: prefix placement against the balancers and two cache-aware routers",
    description:
      `Four qwen2.5-7b engines at max_inflight ${MAX_INFLIGHT}, a fresh deployment per condition. Each agent ` +
      "template has its own ~4,000-character system prompt (playbook and six tool descriptions); every request " +
      "is that prompt and its own 300-character user message, no X-Session-Id, a streamed reply of up to 64 " +
      "tokens. The same requests in the same seeded order under every policy. Policies: " +
      policies.map((p) => p.label).join("; ") +
      ".",
    seed: options.seed,
    timeScale: options.timeScale,
    configs,
    records,
    tables,
    charts,
    checks,
    notes: [
      "Latencies are simulated seconds (wall time x time scale); compare policies within one run.",
      ...(options.gatewayUrl === undefined
        ? []
        : ["Only the running gateway's policy was measured (--gateway)."]),
    ],
    data: Object.fromEntries(all.map((r) => [`${r.workload}:${r.policy}`, r])),
  };
}
