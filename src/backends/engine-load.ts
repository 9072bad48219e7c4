// What an engine says of its own load in its /metrics (vLLM's names), read into numbers the gateway keeps.
import { metricSample } from "../metrics/prometheus-text.js";

export interface EngineLoad {
  runningRequests: number | undefined;
  waitingRequests: number | undefined;
  /** Fraction of KV-cache blocks in use, 0-1. */
  kvCacheUsage: number | undefined;
  /** Cumulative prefix-cache lookups and hits, in tokens (vLLM v1 counts tokens). */
  prefixCacheQueries: number | undefined;
  prefixCacheHits: number | undefined;
  /** Cumulative prompt + generated tokens: a counter that moves while the engine makes progress. */
  processedTokens?: number | undefined;
  /** When it was read (clock ms). */
  readAtMs: number;
}

/** The first of several names an engine may use for one quantity (current vLLM, then older names). */
function first(text: string, names: readonly string[]): number | undefined {
  for (const name of names) {
    const value = metricSample(text, name);
    if (value !== undefined) return value;
  }
  return undefined;
}

function sumOf(a: number | undefined, b: number | undefined): number | undefined {
  return a === undefined && b === undefined ? undefined : (a ?? 0) + (b ?? 0);
}

export function parseEngineLoad(text: string, readAtMs: number): EngineLoad {
  return {
    runningRequests: first(text, ["vllm:num_requests_running"]),
    waitingRequests: first(text, ["vllm:num_requests_waiting"]),
    kvCacheUsage: first(text, ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]),
    prefixCacheQueries: first(text, [
      "vllm:prefix_cache_queries_total",
      "vllm:gpu_prefix_cache_queries_total",
    ]),
    prefixCacheHits: first(text, ["vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total"]),
    processedTokens: sumOf(
      first(text, ["vllm:prompt_tokens_total"]),
      first(text, ["vllm:generation_tokens_total"]),
    ),
    readAtMs,
  };
}
