// Builds the placement policy `affinity.policy` names (undefined for hrw: the decision's own affinity).
import type { Random } from "../../core/random.js";
import { LLMD_DEFAULTS, LlmdScorersPolicy } from "./llmd-scorers.js";
import type { PlacementPolicy } from "./policy.js";
import { SGLANG_DEFAULTS, SglangCacheAwarePolicy } from "./sglang-cache-aware.js";

export const POLICY_NAMES = ["hrw", "sglang_cache_aware", "llmd_scorers"] as const;
export type PolicyName = (typeof POLICY_NAMES)[number];

export interface PolicyConfig {
  policy: PolicyName;
  sglang: {
    cache_threshold: number;
    balance_abs_threshold: number;
    balance_rel_threshold: number;
    eviction_interval_seconds: number;
    max_tree_chars: number;
  };
  llmd: {
    prefix_cache_weight: number;
    queue_weight: number;
    kv_cache_weight: number;
    block_chars: number;
    max_blocks: number;
    lru_capacity_per_backend: number;
  };
}

export const SGLANG_CONFIG_DEFAULTS: PolicyConfig["sglang"] = {
  cache_threshold: SGLANG_DEFAULTS.cacheThreshold,
  balance_abs_threshold: SGLANG_DEFAULTS.balanceAbsThreshold,
  balance_rel_threshold: SGLANG_DEFAULTS.balanceRelThreshold,
  eviction_interval_seconds: SGLANG_DEFAULTS.evictionIntervalMs / 1000,
  max_tree_chars: SGLANG_DEFAULTS.maxTreeChars,
};

export const LLMD_CONFIG_DEFAULTS: PolicyConfig["llmd"] = {
  prefix_cache_weight: LLMD_DEFAULTS.prefixCacheWeight,
  queue_weight: LLMD_DEFAULTS.queueWeight,
  kv_cache_weight: LLMD_DEFAULTS.kvCacheWeight,
  block_chars: LLMD_DEFAULTS.blockChars,
  max_blocks: LLMD_DEFAULTS.maxBlocks,
  lru_capacity_per_backend: LLMD_DEFAULTS.lruCapacityPerBackend,
};

export function createPolicy(
  config: PolicyConfig,
  random: Random,
  engineSignalMaxAgeMs: number,
): PlacementPolicy | undefined {
  switch (config.policy) {
    case "hrw":
      return undefined;
    case "sglang_cache_aware":
      return new SglangCacheAwarePolicy({
        cacheThreshold: config.sglang.cache_threshold,
        balanceAbsThreshold: config.sglang.balance_abs_threshold,
        balanceRelThreshold: config.sglang.balance_rel_threshold,
        evictionIntervalMs: config.sglang.eviction_interval_seconds * 1000,
        maxTreeChars: config.sglang.max_tree_chars,
      });
    case "llmd_scorers":
      return new LlmdScorersPolicy(
        {
          prefixCacheWeight: config.llmd.prefix_cache_weight,
          queueWeight: config.llmd.queue_weight,
          kvCacheWeight: config.llmd.kv_cache_weight,
          blockChars: config.llmd.block_chars,
          maxBlocks: config.llmd.max_blocks,
          lruCapacityPerBackend: config.llmd.lru_capacity_per_backend,
          engineSignalMaxAgeMs: engineSignalMaxAgeMs > 0 ? engineSignalMaxAgeMs : Infinity,
        },
        random,
      );
  }
}
