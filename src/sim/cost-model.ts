// The time one engine step takes, from what the step computes: the only place simulated GPU time comes from.
import type { CostModel } from "./profiles.js";

/** What a scheduled step asks of the GPU, summed over its sequences. */
export interface StepWork {
  /** Prompt (or recomputed) tokens whose KV this step computes. */
  prefillTokens: number;
  /** Sum over prefill chunks of newTokens * (tokensAlreadyInContext + newTokens / 2). */
  prefillAttentionPairs: number;
  /** Sequences producing their next token from a one-token step. */
  decodeSeqs: number;
  /** Sum of the context lengths the decoding sequences attend over. */
  decodeContextTokens: number;
}

export function emptyStepWork(): StepWork {
  return { prefillTokens: 0, prefillAttentionPairs: 0, decodeSeqs: 0, decodeContextTokens: 0 };
}

/** Adds one prefill chunk of `newTokens` after `contextTokens` already-computed ones. */
export function addPrefillChunk(work: StepWork, contextTokens: number, newTokens: number): void {
  work.prefillTokens += newTokens;
  work.prefillAttentionPairs += newTokens * (contextTokens + newTokens / 2);
}

/** Adds one decoding sequence whose new token attends over `contextTokens` (itself included). */
export function addDecode(work: StepWork, contextTokens: number): void {
  work.decodeSeqs += 1;
  work.decodeContextTokens += contextTokens;
}

/**
 * stepMs = overhead + prefill tokens x per-token cost + prefill attention pairs x pair cost
 *        + decoding sequences x per-sequence cost + decode context tokens x KV-read cost.
 * An empty step costs nothing: the engine idles instead of stepping.
 */
export function stepDurationMs(cost: CostModel, work: StepWork): number {
  if (work.prefillTokens === 0 && work.decodeSeqs === 0) return 0;
  return (
    cost.stepOverheadMs +
    work.prefillTokens * cost.prefillMsPerToken +
    work.prefillAttentionPairs * cost.prefillAttentionMsPerTokenPair +
    work.decodeSeqs * cost.decodeMsPerSeq +
    work.decodeContextTokens * cost.kvReadMsPerToken
  );
}
