// Shared fixtures for the simulator tests: schedulers on a manual clock and requests with fixed prompts.
import { ManualClock } from "../../src/core/clock.js";
import type { CostModel } from "../../src/sim/profiles.js";
import { createEngineRequest } from "../../src/sim/request-factory.js";
import type { EngineRequest } from "../../src/sim/request.js";
import { Scheduler, type SchedulerConfig } from "../../src/sim/scheduler.js";

export const FREE: CostModel = {
  stepOverheadMs: 0,
  prefillMsPerToken: 0,
  prefillAttentionMsPerTokenPair: 0,
  decodeMsPerSeq: 0,
  kvReadMsPerToken: 0,
};

/** Round numbers so expected step times are easy to compute by hand. */
export const SIMPLE_COST: CostModel = {
  stepOverheadMs: 10,
  prefillMsPerToken: 0.1,
  prefillAttentionMsPerTokenPair: 0,
  decodeMsPerSeq: 1,
  kvReadMsPerToken: 0,
};

export function makeScheduler(overrides: Partial<SchedulerConfig> = {}): {
  scheduler: Scheduler;
  clock: ManualClock;
} {
  const clock = new ManualClock();
  const scheduler = new Scheduler(
    {
      maxNumSeqs: 16,
      maxNumBatchedTokens: 8192,
      kvCapacityBlocks: 1024,
      blockSizeTokens: 16,
      cost: FREE,
      ...overrides,
    },
    clock,
  );
  return { scheduler, clock };
}

/** `count` token ids starting at `first`: distinct ranges never share a block. */
export function tokenRange(count: number, first = 1): number[] {
  return Array.from({ length: count }, (_, i) => first + i);
}

export function makeRequest(id: string, prompt: number[], outputTokens: number, seed = 7): EngineRequest {
  return createEngineRequest({
    id,
    promptTokenIds: prompt,
    maxTokens: outputTokens,
    maxModelLen: 1_000_000,
    stop: { medianTokens: 10, sigma: 0.5 },
    seed,
    choiceIndex: 0,
    // Scheduler tests need the exact length they ask for.
    ignoreEos: true,
  });
}
