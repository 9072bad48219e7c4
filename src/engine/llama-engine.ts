// The engine core: one llama.cpp context whose sequences are the slots, and generation with prefix reuse.
import { ChatPrompt } from "./chat-prompt.js";
import type { LlamaContext, LlamaModel, LlamaSequence } from "./llama-binding.js";
import { SlotPool, SlotWaitError } from "./slots.js";

export interface EngineShape {
  slots: number;
  /** Tokens per slot. */
  ctxSize: number;
  batchSize: number;
  threads: number;
}

export interface Sampling {
  /** 0 is greedy. */
  temperature: number;
  topP?: number;
  topK?: number;
  seed?: number;
}

export interface GenerateParams {
  prompt: number[];
  maxTokens: number;
  sampling: Sampling;
  /** vLLM's ignore_eos: an end-of-generation token does not end the reply (it is decoded like any other). */
  ignoreEos?: boolean;
  signal: AbortSignal;
  /** The first token is sampled: the prompt is evaluated, and this many of its tokens came from the slot. */
  onFirstToken?: (cachedTokens: number) => void;
  /** New reply text, as soon as it is whole characters. */
  onText?: (text: string) => void;
}

export interface GenerationResult {
  text: string;
  /** The reply's token ids, as generated (`text` is their decoding). */
  tokens: number[];
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
  /** "abort": the signal fired (the client left or the engine is closing). */
  finishReason: "stop" | "length" | "abort";
}

/** A generation that ran to its end (stop or length), not aborted. */
export type FinishedGeneration = GenerationResult & { finishReason: "stop" | "length" };

class Slot {
  /** Leading state tokens that came from the last request's prompt; the rest of the state it generated. */
  sentTokenCount = 0;

  constructor(readonly sequence: LlamaSequence) {}

  get contextTokens(): readonly number[] {
    return this.sequence.contextTokens;
  }
}

/** Tokens llama.cpp has decoded into a sequence so far (node-llama-cpp counts those with logits as "output"). */
function decodedTokens(sequence: LlamaSequence): number {
  return sequence.tokenMeter.usedInputTokens + sequence.tokenMeter.usedOutputTokens;
}

/** Text decoded so far minus an unfinished multi-byte character at its end (U+FFFD from a partial token). */
function wholeCharacters(text: string): string {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 0xfffd) end--;
  return text.slice(0, end);
}

export class LlamaEngine {
  readonly chat: ChatPrompt;
  /** Token ids run from 0 to this, excluded: a prompt of ids is checked against it before llama.cpp sees it. */
  readonly vocabularySize: number;
  private readonly pool: SlotPool<Slot>;

  private constructor(
    readonly model: LlamaModel,
    private readonly context: LlamaContext,
    readonly shape: EngineShape,
  ) {
    this.chat = new ChatPrompt(model);
    this.vocabularySize = model.fileInfo.metadata.tokenizer?.ggml?.tokens?.length ?? 0;
    this.pool = new SlotPool(Array.from({ length: shape.slots }, () => new Slot(context.getSequence())));
  }

  static async create(model: LlamaModel, shape: EngineShape): Promise<LlamaEngine> {
    const context = await model.createContext({
      sequences: shape.slots,
      contextSize: shape.ctxSize,
      batchSize: shape.batchSize,
      threads: shape.threads,
    });
    return new LlamaEngine(model, context, shape);
  }

  get running(): number {
    return this.pool.busy;
  }

  get waiting(): number {
    return this.pool.waiting;
  }

  async generate(params: GenerateParams): Promise<GenerationResult> {
    const { prompt, signal } = params;
    const { slot, commonPrefix } = await this.pool.acquire(prompt, signal);
    try {
      const sequence = slot.sequence;
      // At least one prompt token is evaluated: its logits give the first reply token.
      const keptTokens = Math.min(commonPrefix, prompt.length - 1);
      const decodedBefore = decodedTokens(sequence);
      // Truncate the state to the common prefix; only the rest of the prompt is evaluated after it.
      if (sequence.nextTokenIndex > keptTokens) {
        await sequence.eraseContextTokenRanges([{ start: keptTokens, end: sequence.nextTokenIndex }]);
      }
      slot.sentTokenCount = prompt.length;
      // What the prompt cost, measured rather than planned: where llama.cpp cannot cut a sequence's KV cells,
      // node-llama-cpp silently evaluates the kept tokens again, and then they were not cached.
      let cachedTokens = keptTokens;
      const tokens: number[] = [];
      let sent = "";
      let finishReason: GenerationResult["finishReason"] = "length";
      const sampling = params.sampling;
      for await (const token of sequence.evaluate(prompt.slice(cachedTokens), {
        temperature: sampling.temperature,
        ...(sampling.topP === undefined ? {} : { topP: sampling.topP }),
        ...(sampling.topK === undefined ? {} : { topK: sampling.topK }),
        ...(sampling.seed === undefined ? {} : { seed: sampling.seed }),
      })) {
        if (tokens.length === 0) {
          cachedTokens = Math.max(0, prompt.length - (decodedTokens(sequence) - decodedBefore));
          params.onFirstToken?.(cachedTokens);
        }
        if (signal.aborted) {
          finishReason = "abort";
          break;
        }
        if (params.ignoreEos !== true && this.model.isEogToken(token)) {
          finishReason = "stop";
          break;
        }
        tokens.push(token);
        const whole = wholeCharacters(this.model.detokenize(tokens));
        if (whole.length > sent.length) {
          params.onText?.(whole.slice(sent.length));
          sent = whole;
        }
        if (tokens.length >= params.maxTokens) break;
      }
      const text = this.model.detokenize(tokens);
      if (text.length > sent.length && finishReason !== "abort") params.onText?.(text.slice(sent.length));
      return {
        text,
        tokens,
        promptTokens: prompt.length,
        cachedTokens,
        completionTokens: tokens.length,
        finishReason,
      };
    } finally {
      this.pool.release(slot);
    }
  }

  /** Refuses the requests still waiting for a slot; running ones end through their own signals. */
  stopWaiting(): void {
    this.pool.rejectWaiting(new SlotWaitError("engine_closing", "engine closing"));
  }

  async dispose(): Promise<void> {
    await this.context.dispose();
  }
}
