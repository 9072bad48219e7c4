// What the KV-events study reports of one condition's calls: cache reuse, TTFT, and how well the gateway's
// prediction (expected_cached_tokens) matched what the engine reused (cached_tokens).
import { simSeconds } from "./analysis.js";
import type { CodingRecord } from "./coding-runner.js";
import { percentile, ratio } from "./stats.js";

/** A turn's prediction counts as right when it is within this share of the prompt of the engine's count. */
export const PREDICTION_TOLERANCE = 0.02;

export interface KvStudyNumbers {
  requests: number;
  failed: number;
  subagentRequests: number;
  promptTokens: number;
  /** Prompt tokens the engines computed rather than read from their cache. */
  recomputedTokens: number;
  /** Cached prompt tokens / prompt tokens, from the engines' usage. */
  cachedShare: number;
  ttftP50Seconds: number;
  ttftP99Seconds: number;
  /** The sessions' own calls (the long prompts), without their sub-agents. */
  mainTtftP50Seconds: number;
  mainTtftP99Seconds: number;
  /**
   * The sub-agents' calls (short prompts, most of the calls): the all-call p50 is theirs, so a placement that
   * crowds the sessions' own calls onto few engines and leaves the others to the sub-agents wins it.
   */
  subagentTtftP50Seconds: number;
  subagentTtftP99Seconds: number;
  largestPromptTokens: number;
  /** Calls whose receipt carried expected_cached_tokens (every call, when the gateway places by events). */
  predictedTurns: number;
  /** Of those, the share within PREDICTION_TOLERANCE of the prompt of the engine's cached_tokens. */
  predictionWithinTolerance: number;
  /** Mean and largest |cached - expected| / prompt tokens. */
  predictionErrorMean: number;
  predictionErrorMax: number;
  /**
   * Predictions off by more than the tolerance: the engine reused fewer tokens than predicted (it evicted after
   * placement), or more (a concurrent call stored a shared prefix after placement).
   */
  predictedOver: number;
  predictedUnder: number;
  /** x_agent_serve.reason of every served call, counted. */
  reasons: Record<string, number>;
}

function ok(record: CodingRecord): boolean {
  return record.status === 200 && record.ok;
}

/** |cached - expected| / prompt of a call with a prediction; undefined without one. */
export function predictionError(record: CodingRecord): number | undefined {
  const expected = record.expectedCachedTokens;
  if (expected === null || expected === undefined || record.promptTokens === 0) return undefined;
  return Math.abs(record.cachedTokens - expected) / record.promptTokens;
}

export function kvStudyNumbers(records: readonly CodingRecord[], timeScale: number): KvStudyNumbers {
  const served = records.filter(ok);
  const main = served.filter((r) => r.thread === "main");
  const subagents = served.filter((r) => r.thread === "subagent");
  const ttft = (list: readonly CodingRecord[]): number[] =>
    list.flatMap((r) => (r.ttftMs === null ? [] : [simSeconds(r.ttftMs, timeScale)]));
  const promptTokens = served.reduce((n, r) => n + r.promptTokens, 0);
  const cachedTokens = served.reduce((n, r) => n + r.cachedTokens, 0);
  const predicted = served.filter((r) => predictionError(r) !== undefined);
  const errors = predicted.map((r) => predictionError(r)!);
  const wrong = predicted.filter((r) => predictionError(r)! > PREDICTION_TOLERANCE);
  const reasons: Record<string, number> = {};
  for (const r of served) reasons[r.reason ?? "none"] = (reasons[r.reason ?? "none"] ?? 0) + 1;
  return {
    requests: records.length,
    failed: records.length - served.length,
    subagentRequests: records.filter((r) => r.thread === "subagent").length,
    promptTokens,
    recomputedTokens: promptTokens - cachedTokens,
    cachedShare: ratio(cachedTokens, promptTokens),
    ttftP50Seconds: percentile(ttft(served), 50),
    ttftP99Seconds: percentile(ttft(served), 99),
    mainTtftP50Seconds: percentile(ttft(main), 50),
    mainTtftP99Seconds: percentile(ttft(main), 99),
    subagentTtftP50Seconds: percentile(ttft(subagents), 50),
    subagentTtftP99Seconds: percentile(ttft(subagents), 99),
    largestPromptTokens: Math.max(0, ...served.map((r) => r.promptTokens)),
    predictedTurns: predicted.length,
    predictionWithinTolerance: ratio(errors.filter((e) => e <= PREDICTION_TOLERANCE).length, errors.length),
    predictionErrorMean: ratio(
      errors.reduce((a, b) => a + b, 0),
      errors.length,
    ),
    predictionErrorMax: Math.max(0, ...errors),
    predictedOver: wrong.filter((r) => r.cachedTokens < r.expectedCachedTokens!).length,
    predictedUnder: wrong.filter((r) => r.cachedTokens > r.expectedCachedTokens!).length,
    reasons,
  };
}
