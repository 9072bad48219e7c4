// llm-d's default endpoint-picker profile, re-implemented: prefix-cache 3, queue 2, KV-cache utilisation 2, max-score pick.
import type { Random } from "../../core/random.js";
import { eligibleFilter } from "../placement/filter-eligible.js";
import { placementState } from "../placement/load.js";
import { runPipeline } from "../placement/pipeline.js";
import { kvCacheScorer } from "../placement/score-kv-cache.js";
import { queueScorer } from "../placement/score-queue.js";
import type { PlacementCandidate, Pipeline } from "../placement/types.js";
import { BlockIndex, blockHashes } from "./block-index.js";
import { maxScoreRandomTiePicker } from "./pick-max-score-random.js";
import type { PlacementPolicy, PolicyDecision, PolicyRequest } from "./policy.js";
import { prefixCacheScorer } from "./score-prefix-cache.js";

export interface LlmdScorerSettings {
  prefixCacheWeight: number;
  queueWeight: number;
  kvCacheWeight: number;
  blockChars: number;
  maxBlocks: number;
  lruCapacityPerBackend: number;
  /** Engine readings older than this are treated as missing (neutral scores). */
  engineSignalMaxAgeMs: number;
}

/** llm-d's default-plugins.yaml weights and the extension's prefix plugin defaults (docs/placement-policies.md). */
export const LLMD_DEFAULTS: Omit<LlmdScorerSettings, "engineSignalMaxAgeMs"> = {
  prefixCacheWeight: 3,
  queueWeight: 2,
  kvCacheWeight: 2,
  blockChars: 64,
  maxBlocks: 256,
  lruCapacityPerBackend: 31_250,
};

/**
 * One decision: the eligible backends, each scored 3 x prefix match + 2 x queue + 2 x (1 - KV usage), the
 * best taken (ties at random); then the chosen backend's index gains the prompt's blocks (the extension's
 * PreRequest step). The queue is the gateway's queue for the backend plus the engine's own waiting
 * requests: in front of this gateway a request waits here once the backend's slots are full, where behind
 * llm-d it would wait in the engine.
 */
export class LlmdScorersPolicy implements PlacementPolicy {
  readonly name = "llmd_scorers";
  readonly key: string;
  private readonly indexes = new Map<string, BlockIndex>();
  private readonly picker;

  constructor(
    private readonly settings: LlmdScorerSettings,
    random: Random,
  ) {
    this.picker = maxScoreRandomTiePicker(random);
    this.key = `${this.name}:${JSON.stringify(settings)}`;
  }

  index(tier: string): BlockIndex {
    let index = this.indexes.get(tier);
    if (index === undefined) {
      index = new BlockIndex(this.settings.lruCapacityPerBackend);
      this.indexes.set(tier, index);
    }
    return index;
  }

  select<T extends PlacementCandidate>(
    request: PolicyRequest,
    candidates: readonly T[],
    nowMs: number,
  ): PolicyDecision<T> | undefined {
    const index = this.index(request.tier);
    for (const backend of index.backends())
      if (!candidates.some((c) => c.id === backend)) index.removeBackend(backend);
    const hashes = blockHashes(request.tier, request.promptBytes, this.settings);
    const pipeline: Pipeline = {
      filters: [eligibleFilter],
      scorers: [
        {
          scorer: prefixCacheScorer(index.longestPrefix(hashes), hashes.length),
          weight: this.settings.prefixCacheWeight,
        },
        { scorer: queueScorer, weight: this.settings.queueWeight },
        { scorer: kvCacheScorer, weight: this.settings.kvCacheWeight },
      ],
      picker: this.picker,
    };
    const state = placementState({ hi: 0, lo: 0 }, candidates, {
      loadFactor: 0,
      nowMs,
      engineSignalMaxAgeMs: this.settings.engineSignalMaxAgeMs,
    });
    const request_ = {
      tier: request.tier,
      sessionId: undefined,
      prefixKey: undefined,
      exclude: request.exclude,
    };
    const backend = runPipeline(pipeline, request_, state, candidates);
    if (backend === undefined) return undefined;
    index.add(hashes, backend.id);
    return { backend, reason: "max_score" };
  }
}
