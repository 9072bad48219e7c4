// Turns a prompt and the request's sampling knobs into an engine request with a fixed, reproducible reply plan.
import { SeededRandom } from "../core/random.js";
import { hashBlock, ROOT_BLOCK_HASH, saltRootHash } from "./block-hash.js";
import type { StopDistribution } from "./profiles.js";
import { EngineRequest } from "./request.js";
import { mixSeed, ReplyGenerator, sampleStopLength, ScriptedReply } from "./text-generator.js";

export interface ReplyPlanInput {
  id: string;
  promptTokenIds: readonly number[];
  /** The request's max_tokens; when absent the reply length is drawn from `stop`. */
  maxTokens: number | undefined;
  maxModelLen: number;
  stop: StopDistribution;
  /** The request's `seed`, else the engine's: same seed + same prompt = same reply, like greedy decoding. */
  seed: number;
  /** Distinguishes the n choices of one request. */
  choiceIndex: number;
  cacheSalt?: string;
  /**
   * Text the reply must be (a tool call, structured output): its natural length ends it with end-of-turn, and
   * max_tokens only cuts it short. Without it the reply is pseudo-text.
   */
  scriptedText?: string;
}

/** The seed of a request's reply: the prompt, the seed and the choice decide it, like greedy decoding. */
export function replySeed(input: Pick<ReplyPlanInput, "promptTokenIds" | "seed" | "choiceIndex">): number {
  const prompt = input.promptTokenIds;
  return mixSeed(input.seed, hashBlock(ROOT_BLOCK_HASH, prompt, 0, prompt.length), input.choiceIndex);
}

export function createEngineRequest(input: ReplyPlanInput): EngineRequest {
  const prompt = input.promptTokenIds;
  const room = input.maxModelLen - prompt.length;
  if (room < 1) throw new RangeError(`prompt of ${prompt.length} tokens leaves no room to generate`);
  const random = new SeededRandom(replySeed(input));
  const rootHash = input.cacheSalt === undefined ? ROOT_BLOCK_HASH : saltRootHash(input.cacheSalt);
  if (input.scriptedText !== undefined) {
    const script = new ScriptedReply(input.scriptedText);
    const length = Math.min(script.lengthTokens, input.maxTokens ?? script.lengthTokens, room);
    return new EngineRequest({
      id: input.id,
      promptTokenIds: prompt,
      outputLengthTokens: length,
      finishReason: length === script.lengthTokens ? "stop" : "length",
      generator: script,
      rootHash,
    });
  }
  let length: number;
  let finishReason: "stop" | "length";
  if (input.maxTokens !== undefined) {
    // An explicit max_tokens is the reply length: the simulator never stops early on its own.
    length = Math.min(input.maxTokens, room);
    finishReason = "length";
  } else {
    const drawn = sampleStopLength(random, input.stop);
    length = Math.min(drawn, room);
    finishReason = drawn <= room ? "stop" : "length";
  }
  return new EngineRequest({
    id: input.id,
    promptTokenIds: prompt,
    outputLengthTokens: length,
    finishReason,
    generator: new ReplyGenerator(random, length, finishReason === "stop"),
    rootHash,
  });
}
