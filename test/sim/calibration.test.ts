// The profiles against the published figures they were fitted to, and the affinity effect those produce.
import { describe, expect, it } from "vitest";
import { ManualClock } from "../../src/core/clock.js";
import { renderChat, type ChatMessage } from "../../src/sim/chat-template.js";
import { getProfile, type SimProfile } from "../../src/sim/profiles.js";
import { createEngineRequest } from "../../src/sim/request-factory.js";
import { Scheduler } from "../../src/sim/scheduler.js";
import { runUntilIdle } from "../../src/sim/simulate.js";

function engine(profile: SimProfile): { scheduler: Scheduler; clock: ManualClock } {
  const clock = new ManualClock();
  return { scheduler: new Scheduler({ ...profile, blockSizeTokens: 16 }, clock), clock };
}

/** Qwen2.5 Speed Benchmark, vLLM 0.6.3, A100 80GB, batch 1, 2048 generated tokens: tokens per second. */
const QWEN25_7B_VLLM_A100: [inputTokens: number, tokensPerSecond: number][] = [
  [1, 84.28],
  [6144, 80.7],
  [14336, 77.69],
  [30720, 70.33],
];

describe("profile calibration", () => {
  it.each(QWEN25_7B_VLLM_A100)(
    "qwen2.5-7b generates 2048 tokens after %i input tokens at the published speed",
    (input, speed) => {
      const { scheduler, clock } = engine(getProfile("qwen2.5-7b"));
      scheduler.add(
        createEngineRequest({
          id: "bench",
          promptTokenIds: Array.from({ length: input }, (_, i) => i),
          maxTokens: 2048,
          maxModelLen: 40_000,
          stop: { medianTokens: 1, sigma: 0 },
          seed: 1,
          choiceIndex: 0,
          ignoreEos: true,
        }),
      );
      runUntilIdle(scheduler, clock);
      const simulated = 2048 / (clock.nowMs() / 1000);
      expect(Math.abs(simulated - speed) / speed).toBeLessThan(0.05);
    },
  );

  it("qwen2.5-72b-fp8 decodes a single stream at about 21 ms per token", () => {
    const { scheduler, clock } = engine(getProfile("qwen2.5-72b-fp8"));
    scheduler.add(
      createEngineRequest({
        id: "bench",
        promptTokenIds: [1, 2, 3],
        maxTokens: 1000,
        maxModelLen: 32_768,
        stop: { medianTokens: 1, sigma: 0 },
        seed: 1,
        choiceIndex: 0,
        ignoreEos: true,
      }),
    );
    runUntilIdle(scheduler, clock);
    expect(clock.nowMs() / 1000).toBeGreaterThan(20);
    expect(clock.nowMs() / 1000).toBeLessThan(23);
  });

  it("sizes the KV cache from GPU memory left after weights", () => {
    // ~1.02 M tokens for 7B on an A100 80GB and ~170 k tokens for 72B FP8 on an H200.
    expect(getProfile("qwen2.5-7b").kvCapacityBlocks * 16).toBeGreaterThan(900_000);
    expect(getProfile("qwen2.5-72b-fp8").kvCapacityBlocks * 16).toBeGreaterThan(150_000);
  });
});

describe("affinity effect from the paged cache", () => {
  it.each(["qwen2.5-7b", "qwen2.5-72b-fp8"])(
    "%s: warm turns of a 6-turn session with a 3 KB system prompt reach first token 3x sooner than the cold turn",
    (name) => {
      const profile = getProfile(name);
      const { scheduler, clock } = engine(profile);
      const messages: ChatMessage[] = [{ role: "system", content: "You are a coding agent. ".repeat(128) }];
      const ttftMs: number[] = [];
      for (let turn = 0; turn < 6; turn++) {
        messages.push({
          role: "user",
          content: `Turn ${turn}: read src/module${turn}.ts and summarise it. `.repeat(5),
        });
        const request = createEngineRequest({
          id: `turn-${turn}`,
          promptTokenIds: renderChat(messages),
          maxTokens: undefined,
          maxModelLen: profile.maxModelLen,
          stop: profile.stop,
          seed: 3,
          choiceIndex: 0,
        });
        scheduler.add(request);
        runUntilIdle(scheduler, clock);
        ttftMs.push(request.firstTokenMs! - request.arrivalMs);
        messages.push({ role: "assistant", content: request.outputTexts.join("") });
      }
      const cold = ttftMs[0]!;
      for (const warm of ttftMs.slice(1)) expect(cold / warm).toBeGreaterThanOrEqual(3);
    },
  );
});
