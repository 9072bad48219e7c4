// One sequence inside the simulated engine: its tokens, its progress, its KV blocks and its timestamps.
import { ROOT_BLOCK_HASH } from "./block-hash.js";
import type { ReplySource } from "./text-generator.js";

export type RequestStatus = "waiting" | "running" | "finished";
export type FinishReason = "stop" | "length" | "abort";

export interface EngineRequestInit {
  id: string;
  promptTokenIds: readonly number[];
  /** Exactly how many tokens the reply will have (the caller already applied max_tokens or the stop draw). */
  outputLengthTokens: number;
  /** Why the reply ends at that length: "stop" when its last token is end-of-turn, else "length". */
  finishReason: "stop" | "length";
  generator: ReplySource;
  /** Parent key of the first block (vLLM's cache_salt); ROOT_BLOCK_HASH when unsalted. */
  rootHash?: number;
  /** vLLM's cache_salt, hashed into the first block's extra keys (KV events). */
  cacheSalt?: string | undefined;
  /** The session the request carried (body `session_id` or X-Session-ID), echoed on its BlockStored events. */
  sessionId?: string | undefined;
}

export class EngineRequest {
  readonly id: string;
  readonly promptLength: number;
  readonly outputLengthTokens: number;
  readonly plannedFinishReason: "stop" | "length";
  readonly rootHash: number;
  readonly generator: ReplySource;
  readonly cacheSalt: string | undefined;
  readonly sessionId: string | undefined;
  /** Prompt ids followed by every reply id sampled so far. */
  readonly tokens: number[];
  /** Text of each reply token, in order ("" for end-of-turn). */
  readonly outputTexts: string[] = [];

  status: RequestStatus = "waiting";
  finishReason: FinishReason | undefined;
  /** Tokens whose KV is in the cache for this request (cached prefix included). */
  numComputedTokens = 0;
  /** Prompt tokens served from the prefix cache at first scheduling; undefined until then. */
  numCachedTokens: number | undefined;
  numPreemptions = 0;
  /** Physical block ids, in sequence order. */
  readonly blockIds: number[] = [];
  /** Keys of the request's full blocks, computed lazily as tokens become known. */
  readonly blockHashes: number[] = [];
  /** vLLM's digests of the full blocks, computed only when the engine publishes KV events. */
  readonly vllmBlockDigests: Uint8Array[] = [];
  /** How many of blockIds already carry their key in the cache. */
  numCachedBlocks = 0;

  arrivalMs = 0;
  firstScheduledMs: number | undefined;
  firstTokenMs: number | undefined;
  finishedMs: number | undefined;

  constructor(init: EngineRequestInit) {
    if (init.promptTokenIds.length === 0) throw new RangeError("a request needs at least one prompt token");
    if (init.outputLengthTokens < 1) throw new RangeError("a request must generate at least one token");
    this.id = init.id;
    this.tokens = init.promptTokenIds.slice();
    this.promptLength = init.promptTokenIds.length;
    this.outputLengthTokens = init.outputLengthTokens;
    this.plannedFinishReason = init.finishReason;
    this.generator = init.generator;
    this.rootHash = init.rootHash ?? ROOT_BLOCK_HASH;
    this.cacheSalt = init.cacheSalt;
    this.sessionId = init.sessionId;
  }

  get numOutputTokens(): number {
    return this.tokens.length - this.promptLength;
  }

  get isFinished(): boolean {
    return this.status === "finished";
  }

  /** Samples the next reply token; returns true when that was the last one. */
  appendNextToken(): boolean {
    const token = this.generator.token(this.numOutputTokens);
    this.tokens.push(token.id);
    this.outputTexts.push(token.text);
    return this.numOutputTokens >= this.outputLengthTokens;
  }
}
