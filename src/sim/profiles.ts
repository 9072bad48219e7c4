// Engine profiles: the cost-model constants and engine limits of each simulated model/GPU pair, with sources.
//
// Sources (also listed in docs/simulator.md):
//  [Q25] Qwen team, "Qwen2.5 Speed Benchmark" (qwen.readthedocs.io, docs/source/benchmark/speed_benchmark.rst in
//        QwenLM/Qwen2.5): vLLM 0.6.3, one NVIDIA A100 80GB, batch size 1, 2048 generated tokens.
//        Qwen2.5-7B-Instruct BF16: 84.28 tok/s at input 1, 80.70 at 6144, 77.69 at 14336, 70.33 at 30720.
//        Qwen2.5-72B-Instruct GPTQ-Int8 on 2 x A100: 31.40 tok/s at input 1.
//  [A100] NVIDIA A100 datasheet: 80 GB HBM2e at 2,039 GB/s, 312 TFLOPS dense BF16.
//  [H200] NVIDIA H200 datasheet: 141 GB HBM3e at 4.8 TB/s, 1,979 TFLOPS dense FP8, 989 TFLOPS dense BF16.
//  [CFG]  Model configs on the Hugging Face hub: Qwen2.5-7B 28 layers x 4 KV heads x 128 dims (57,344 B of BF16
//         KV per token), 7.62 B parameters; Qwen2.5-72B 80 layers x 8 KV heads x 128 dims (327,680 B per token),
//         72.7 B parameters of which 2.49 B are the (untied) embedding and LM head.
//  [VLLM] vllm/engine/arg_utils.py (EngineArgs.get_batch_defaults): the OpenAI server defaults to
//         max_num_batched_tokens=2048, max_num_seqs=256 on A100, and 8192 / 1024 on other GPUs of >= 70 GiB.
import { SIM_DEFAULTS } from "./defaults.js";

/** What one engine step costs; see docs/simulator.md for the formula. */
export interface CostModel {
  /** Fixed cost of any non-empty forward pass: reading every weight once plus launch overhead. */
  stepOverheadMs: number;
  /** Linear-layer compute per prompt token prefilled in the step. */
  prefillMsPerToken: number;
  /** Attention compute per (new token, attended token) pair during prefill: the quadratic term. */
  prefillAttentionMsPerTokenPair: number;
  /** Extra cost per sequence decoding one token in the step (its row of every GEMM, sampling). */
  decodeMsPerSeq: number;
  /** Reading one token's K and V from HBM while a decoding sequence attends over its context. */
  kvReadMsPerToken: number;
}

/** Log-normal length of a reply when the request sets no max_tokens. */
export interface StopDistribution {
  medianTokens: number;
  sigma: number;
}

export interface SimProfile {
  name: string;
  description: string;
  /** Served model id (what /v1/models lists and requests must name). */
  model: string;
  maxModelLen: number;
  maxNumSeqs: number;
  /** Token budget of one step: vLLM's chunked-prefill limit. */
  maxNumBatchedTokens: number;
  kvCapacityBlocks: number;
  cost: CostModel;
  stop: StopDistribution;
}

interface MemoryPlan {
  gpuMemoryGiB: number;
  /** vLLM's --gpu-memory-utilization default. */
  memoryUtilization: number;
  weightsGiB: number;
  /** Activations at the profiling batch, CUDA graphs and non-torch allocations. */
  runtimeReserveGiB: number;
  kvBytesPerToken: number;
}

/** The number of KV blocks vLLM would carve out of what is left after weights and runtime reserve. */
export function kvBlocksFor(
  plan: MemoryPlan,
  blockSizeTokens: number = SIM_DEFAULTS.blockSizeTokens,
): number {
  const kvBytes =
    (plan.gpuMemoryGiB * plan.memoryUtilization - plan.weightsGiB - plan.runtimeReserveGiB) * 2 ** 30;
  return Math.floor(kvBytes / (plan.kvBytesPerToken * blockSizeTokens));
}

/** A typical chat reply: median 200 tokens, 90th percentile about 490. */
const CHAT_REPLY_STOP: StopDistribution = { medianTokens: 200, sigma: 0.7 };

/**
 * Qwen2.5-7B-Instruct, BF16, one A100 80GB, vLLM defaults for that GPU.
 *
 * Fit to [Q25]: a batch-1 decode step at ~1k context takes 1000 / 84.28 = 11.87 ms. The extra time per input token
 * of the longer-input rows, (2048 / speed - 2048 / 84.28) / input, is 0.176, 0.144 and 0.157 ms; it is the prefill
 * of that token plus 2048 decode steps reading its KV. kvReadMsPerToken is 57,344 B at ~95% of [A100]'s 2.04 TB/s;
 * prefill at 0.075 ms/token is ~65% of the 312 TFLOPS peak for 15.2 GFLOP/token. With the 2048-token chunked
 * prefill, the model reproduces the four [Q25] rows within 1.5% (test/sim/calibration.test.ts checks 5%).
 */
const QWEN25_7B: SimProfile = {
  name: "qwen2.5-7b",
  description: "Qwen2.5-7B-Instruct BF16 on one A100 80GB (calibrated to the Qwen2.5 vLLM speed benchmark)",
  model: "Qwen/Qwen2.5-7B-Instruct",
  maxModelLen: 32_768,
  maxNumSeqs: 256,
  maxNumBatchedTokens: 2048,
  kvCapacityBlocks: kvBlocksFor({
    gpuMemoryGiB: 79.2,
    memoryUtilization: 0.9,
    weightsGiB: 14.2,
    runtimeReserveGiB: 2.5,
    kvBytesPerToken: 57_344,
  }),
  cost: {
    stepOverheadMs: 11.72,
    prefillMsPerToken: 0.075,
    // 4 * 3584 hidden * 28 layers = 0.40 MFLOP per pair at ~65% of 312 TFLOPS.
    prefillAttentionMsPerTokenPair: 2.0e-6,
    // 15.2 GFLOP per token at ~50% of 312 TFLOPS.
    decodeMsPerSeq: 0.1,
    kvReadMsPerToken: 3.0e-5,
  },
  stop: CHAT_REPLY_STOP,
};

/**
 * Qwen2.5-72B-Instruct with FP8 weights (vLLM --quantization fp8) on one H200 141GB.
 *
 * No single-GPU FP8 row exists in [Q25]; its closest, GPTQ-Int8 on two A100s, decodes at 31.8 ms/token, ~59% of
 * the 4.08 TB/s the pair offers for ~75 GB of weights. On one [H200] (no tensor-parallel all-reduce) we assume
 * ~75% of 4.8 TB/s: 75.2 GB of weights -> 21 ms per step. Prefill: 145 GFLOP/token at ~45% of 1,979 TFLOPS FP8
 * = 0.16 ms/token. KV reads: 327,680 B/token at 70% of 4.8 TB/s.
 */
const QWEN25_72B_FP8: SimProfile = {
  name: "qwen2.5-72b-fp8",
  description: "Qwen2.5-72B-Instruct with FP8 weights on one H200 141GB (scaled from the Qwen2.5 benchmark)",
  model: "Qwen/Qwen2.5-72B-Instruct",
  maxModelLen: 32_768,
  maxNumSeqs: 1024,
  maxNumBatchedTokens: 8192,
  kvCapacityBlocks: kvBlocksFor({
    gpuMemoryGiB: 139.8,
    memoryUtilization: 0.9,
    weightsGiB: 70.0,
    runtimeReserveGiB: 4.0,
    kvBytesPerToken: 327_680,
  }),
  cost: {
    stepOverheadMs: 21.0,
    prefillMsPerToken: 0.16,
    // 4 * 8192 hidden * 80 layers = 2.6 MFLOP per pair in BF16 attention at ~50% of 989 TFLOPS.
    prefillAttentionMsPerTokenPair: 5.3e-6,
    decodeMsPerSeq: 0.15,
    kvReadMsPerToken: 9.75e-5,
  },
  stop: CHAT_REPLY_STOP,
};

/** No simulated time at all: every step is free, so only the HTTP path costs anything. */
const INSTANT: SimProfile = {
  name: "instant",
  description: "zero-cost steps, for measuring gateway overhead (the paged cache still works)",
  model: "Qwen/Qwen2.5-7B-Instruct",
  maxModelLen: 32_768,
  maxNumSeqs: 1024,
  maxNumBatchedTokens: 8192,
  kvCapacityBlocks: 65_536,
  cost: {
    stepOverheadMs: 0,
    prefillMsPerToken: 0,
    prefillAttentionMsPerTokenPair: 0,
    decodeMsPerSeq: 0,
    kvReadMsPerToken: 0,
  },
  stop: CHAT_REPLY_STOP,
};

export const PROFILES: Readonly<Record<string, SimProfile>> = {
  [INSTANT.name]: INSTANT,
  [QWEN25_7B.name]: QWEN25_7B,
  [QWEN25_72B_FP8.name]: QWEN25_72B_FP8,
};

export const PROFILE_NAMES: readonly string[] = Object.keys(PROFILES);

export function getProfile(name: string): SimProfile {
  const profile = PROFILES[name];
  if (!profile) {
    throw new RangeError(`unknown profile '${name}' (known: ${PROFILE_NAMES.join(", ")})`);
  }
  return profile;
}
