// Turns a prompt and the request's sampling knobs into an engine request with a fixed, reproducible reply plan.
import { SeededRandom } from "../core/random.js";
import { hashBlock, ROOT_BLOCK_HASH, saltRootHash } from "./block-hash.js";
import type { StopDistribution } from "./profiles.js";
import { EngineRequest } from "./request.js";
import {
  mixSeed,
  ReplyGenerator,
  sampleStopLength,
  ScriptedReply,
  type ReplySource,
  type ReplyToken,
} from "./text-generator.js";

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
  /**
   * A continued reply (continue_final_message, an Anthropic prefill): the reply is the one `seedPromptTokenIds`
   * gets, less its first `skipTokens` tokens (which the prompt's open final message holds already).
   */
  continued?: { seedPromptTokenIds: readonly number[]; skipTokens: number } | undefined;
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
  const skip = input.continued?.skipTokens ?? 0;
  const seedPrompt = input.continued?.seedPromptTokenIds ?? prompt;
  const random = new SeededRandom(replySeed({ ...input, promptTokenIds: seedPrompt }));
  const rootHash = input.cacheSalt === undefined ? ROOT_BLOCK_HASH : saltRootHash(input.cacheSalt);
  if (input.scriptedText !== undefined) {
    const script = new ScriptedReply(input.scriptedText);
    const left = Math.max(1, script.lengthTokens - skip);
    const length = Math.min(left, input.maxTokens ?? left, room);
    return new EngineRequest({
      id: input.id,
      promptTokenIds: prompt,
      outputLengthTokens: length,
      finishReason: length === left ? "stop" : "length",
      generator: skip === 0 ? script : new SkippedReply(script, skip),
      rootHash,
      cacheSalt: input.cacheSalt,
      sessionId: input.sessionId,
    });
  }
  // The natural length is drawn even when it is not used, so the reply's text depends on the prompt and the seed
  // only, not on max_tokens or ignore_eos: a capped reply is the natural one cut short.
  const natural = sampleStopLength(random, input.stop);
  const cap = Math.min(input.maxTokens ?? room, room);
  const naturalLeft = Math.max(1, natural - skip);
  const stops = input.ignoreEos !== true && naturalLeft <= cap;
  const length = stops ? naturalLeft : cap;
  const finishReason = stops ? "stop" : "length";
  const generator = new ReplyGenerator(random, skip + length, finishReason === "stop");
  return new EngineRequest({
    id: input.id,
    promptTokenIds: prompt,
    outputLengthTokens: length,
    finishReason,
    generator: skip === 0 ? generator : new SkippedReply(generator, skip),
    rootHash,
    cacheSalt: input.cacheSalt,
    sessionId: input.sessionId,
  });
}

/** A reply whose first tokens are already in the prompt (a continued message): they are drawn, then skipped. */
class SkippedReply implements ReplySource {
  constructor(
    private readonly reply: ReplySource,
    private readonly skip: number,
  ) {
    // Drawn in order, as the generator wants: the rest then comes out as it would have.
    for (let index = 0; index < skip; index++) reply.token(index);
  }

  token(index: number): ReplyToken {
    return this.reply.token(index + this.skip);
  }
}
