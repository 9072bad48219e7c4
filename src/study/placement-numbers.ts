// The numbers the placement studies report per condition: TTFT and E2E p50/p99, prefix-cache hit rate, throughput.
import { simSeconds } from "./analysis.js";
import type { RequestRecord } from "./session-runner.js";
import { percentile, ratio } from "./stats.js";

export interface PlacementNumbers {
  requests: number;
  failed: number;
  ttftP50Seconds: number;
  ttftP99Seconds: number;
  e2eP50Seconds: number;
  e2eP99Seconds: number;
  /** Cached prompt tokens / prompt tokens, from the engines' usage (cached_tokens). */
  prefixCacheHitRate: number;
  /** Completion tokens per simulated second, over the condition's span. */
  throughputTokensPerSecond: number;
  requestsPerSecond: number;
  /** How many requests each reason placed (x_agent_serve.reason). */
  reasons: Record<string, number>;
}

export function placementNumbers(records: readonly RequestRecord[], timeScale: number): PlacementNumbers {
  const ok = records.filter((r) => r.status === 200 && r.ok);
  const ttft = ok
    .map((r) => r.ttftMs)
    .filter((v): v is number => v !== null)
    .map((ms) => simSeconds(ms, timeScale));
  const e2e = ok.map((r) => simSeconds(r.e2eMs, timeScale));
  const spanMs = records.reduce((end, r) => Math.max(end, r.startMs + r.e2eMs), 0);
  const spanSeconds = simSeconds(spanMs, timeScale);
  const reasons: Record<string, number> = {};
  for (const r of ok) reasons[r.reason ?? "?"] = (reasons[r.reason ?? "?"] ?? 0) + 1;
  return {
    requests: records.length,
    failed: records.length - ok.length,
    ttftP50Seconds: percentile(ttft, 50),
    ttftP99Seconds: percentile(ttft, 99),
    e2eP50Seconds: percentile(e2e, 50),
    e2eP99Seconds: percentile(e2e, 99),
    prefixCacheHitRate: ratio(
      ok.reduce((n, r) => n + r.cachedTokens, 0),
      ok.reduce((n, r) => n + r.promptTokens, 0),
    ),
    throughputTokensPerSecond:
      spanSeconds > 0 ? ok.reduce((n, r) => n + r.completionTokens, 0) / spanSeconds : 0,
    requestsPerSecond: spanSeconds > 0 ? ok.length / spanSeconds : 0,
    reasons,
  };
}

export function reasonsText(reasons: Record<string, number>): string {
  return Object.entries(reasons)
    .sort((a, b) => b[1] - a[1])
    .map(([reason, n]) => `${reason} ${n}`)
    .join(", ");
}
