// Turns a prompt and the request's sampling knobs into an engine request with a fixed, reproducible reply plan.
import { SeededRandom } from "../core/random.js";
import { hashBlock, ROOT_BLOCK_HASH, saltRootHash } from "./block-hash.js";
import type { StopDistribution } from "./profiles.js";
import { EngineRequest } from "./request.js";
import { mixSeed, ReplyGenerator, sampleStopLength, ScriptedReply } from "./text-generator.js";

export interface ReplyPlanInput {
  id: string;
  promptTokenIds: readonly number[];
  /** The request's max_tokens: it caps the natural length drawn from `stop`. */
  maxTokens: number | undefined;
  /** vLLM's `ignore_eos`: never stop on end-of-turn, so the reply is exactly max_tokens (or fills the window). */
  ignoreEos?: boolean;
  maxModelLen: number;
  stop: StopDistribution;
  /** The request's `seed`, else the engine's: same seed + same prompt = same reply, like greedy decoding. */
  seed: number;
  /** Distinguishes the n choices of one request. */
  choiceIndex: number;
  cacheSalt?: string;
  /** The session the request carried (echoed on its KV events). */
  sessionId?: string | undefined;
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
      cacheSalt: input.cacheSalt,
      sessionId: input.sessionId,
    });
  }
  // The natural length is drawn even when it is not used, so the reply's text depends on the prompt and the seed
  // only, not on max_tokens or ignore_eos: a capped reply is the natural one cut short.
  const natural = sampleStopLength(random, input.stop);
  const cap = Math.min(input.maxTokens ?? room, room);
  const stops = input.ignoreEos !== true && natural <= cap;
  const length = stops ? natural : cap;
  const finishReason = stops ? "stop" : "length";
  return new EngineRequest({
    id: input.id,
    promptTokenIds: prompt,
    outputLengthTokens: length,
    finishReason,
    generator: new ReplyGenerator(random, length, finishReason === "stop"),
    rootHash,
    cacheSalt: input.cacheSalt,
    sessionId: input.sessionId,
  });
}
