// Turns a condition's request records into the numbers a study reports (latencies in simulated seconds).
import type { RequestRecord } from "./session-runner.js";
import { percentile, ratio } from "./stats.js";

export interface ConditionNumbers {
  requests: number;
  failed: number;
  /** From x_agent_serve: requests whose binding was reused. */
  bindingHits: number;
  bindingHitRate: number;
  /** From the engines' usage: cached prompt tokens / prompt tokens. */
  prefixCacheHitRate: number;
  promptTokens: number;
  cachedTokens: number;
  ttftP50Seconds: number;
  ttftP95Seconds: number;
  e2eP50Seconds: number;
  e2eP95Seconds: number;
  /** Turn 1 of each session vs later turns. */
  coldTtftP50Seconds: number;
  warmTtftP50Seconds: number;
  coldE2eP50Seconds: number;
  warmE2eP50Seconds: number;
}

/** Wall-clock ms of a time-scaled run -> seconds of simulated engine time. */
export function simSeconds(wallMs: number, timeScale: number): number {
  return (wallMs * timeScale) / 1000;
}

export function analyze(records: readonly RequestRecord[], timeScale: number): ConditionNumbers {
  const ok = records.filter((r) => r.status === 200 && r.ok);
  const seconds = (values: number[]): number[] => values.map((ms) => simSeconds(ms, timeScale));
  const ttft = (list: readonly RequestRecord[]): number[] =>
    seconds(list.map((r) => r.ttftMs).filter((v): v is number => v !== null));
  const e2e = (list: readonly RequestRecord[]): number[] => seconds(list.map((r) => r.e2eMs));
  const cold = ok.filter((r) => r.turn === 1);
  const warm = ok.filter((r) => r.turn > 1);
  const promptTokens = ok.reduce((sum, r) => sum + r.promptTokens, 0);
  const cachedTokens = ok.reduce((sum, r) => sum + r.cachedTokens, 0);
  const bindingHits = ok.filter((r) => r.affinityHit === true).length;
  return {
    requests: records.length,
    failed: records.length - ok.length,
    bindingHits,
    bindingHitRate: ratio(bindingHits, ok.length),
    prefixCacheHitRate: ratio(cachedTokens, promptTokens),
    promptTokens,
    cachedTokens,
    ttftP50Seconds: percentile(ttft(ok), 50),
    ttftP95Seconds: percentile(ttft(ok), 95),
    e2eP50Seconds: percentile(e2e(ok), 50),
    e2eP95Seconds: percentile(e2e(ok), 95),
    coldTtftP50Seconds: percentile(ttft(cold), 50),
    warmTtftP50Seconds: percentile(ttft(warm), 50),
    coldE2eP50Seconds: percentile(e2e(cold), 50),
    warmE2eP50Seconds: percentile(e2e(warm), 50),
  };
}

export function pct(fraction: number): string {
  return Number.isNaN(fraction) ? "-" : `${(fraction * 100).toFixed(1)}%`;
}

export function sec(value: number): string {
  return Number.isNaN(value) ? "-" : value.toFixed(value < 1 ? 3 : 2);
}

/** A count the one way every report writes counts: with thousands separators ("10,504,080"); "-" for NaN. */
export function count(value: number): string {
  return Number.isNaN(value) ? "-" : value.toLocaleString("en-US", { maximumFractionDigits: 2 });
}
