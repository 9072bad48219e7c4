// The engine core over a scripted llama.cpp sequence: what it erases, what it evaluates, what it reports as cached.
import { describe, expect, it } from "vitest";
import type { LlamaContext, LlamaModel, LlamaSequence } from "../../src/engine/llama-binding.js";
import { LlamaEngine } from "../../src/engine/llama-engine.js";

/** A sequence that keeps its token list like node-llama-cpp does and generates token 100 + n forever. */
class ScriptedSequence implements LlamaSequence {
  readonly contextSize = 1024;
  contextTokens: number[] = [];
  readonly erased: { start: number; end: number }[][] = [];
  readonly evaluated: number[][] = [];
  readonly tokenMeter = { usedInputTokens: 0, usedOutputTokens: 0 };

  /** `cutFails`: llama.cpp cannot cut the cells, so the kept tokens are evaluated again (node-llama-cpp's fallback). */
  constructor(private readonly cutFails = false) {}

  get nextTokenIndex(): number {
    return this.contextTokens.length;
  }

  eraseContextTokenRanges(ranges: { start: number; end: number }[]): Promise<void> {
    this.erased.push(ranges);
    for (const { start, end } of ranges) this.contextTokens.splice(start, end - start);
    if (this.cutFails) this.tokenMeter.usedInputTokens += this.contextTokens.length;
    return Promise.resolve();
  }

  async *evaluate(tokens: number[]): AsyncGenerator<number, void, void> {
    this.evaluated.push(tokens);
    let input = tokens;
    for (let n = 0; ; n++) {
      this.contextTokens.push(...input);
      this.tokenMeter.usedInputTokens += input.length - 1;
      this.tokenMeter.usedOutputTokens += 1;
      const token = 100 + n;
      yield await Promise.resolve(token);
      input = [token];
    }
  }

  dispose(): Promise<void> {
    return Promise.resolve();
  }
}

/** `eogToken`: the token the model treats as end-of-generation (none by default). */
function scriptedModel(sequences: ScriptedSequence[], eogToken?: number): LlamaModel {
  const context: LlamaContext = {
    getSequence: () => sequences.shift()!,
    dispose: () => Promise.resolve(),
  };
  return {
    tokenize: (text) => [...text].map((c) => c.charCodeAt(0)),
    detokenize: (tokens) => tokens.map((t) => String.fromCharCode(t)).join(""),
    isEogToken: (token) => token === eogToken,
    trainContextSize: 1024,
    fileInfo: { metadata: { tokenizer: { ggml: { tokens: Array.from({ length: 256 }, () => "") } } } },
    createContext: () => Promise.resolve(context),
    dispose: () => Promise.resolve(),
  };
}

const SHAPE = { slots: 1, ctxSize: 1024, batchSize: 64, threads: 1 };

function run(engine: LlamaEngine, prompt: number[], maxTokens: number): ReturnType<LlamaEngine["generate"]> {
  return engine.generate({
    prompt,
    maxTokens,
    sampling: { temperature: 0 },
    signal: new AbortController().signal,
  });
}

describe("LlamaEngine's use of a slot", () => {
  it("cuts the state to the common prefix and evaluates only the rest of the prompt", async () => {
    const sequence = new ScriptedSequence();
    const free = new ScriptedSequence();
    const engine = await LlamaEngine.create(scriptedModel([sequence, free]), { ...SHAPE, slots: 2 });
    const first = [1, 2, 3, 4, 5, 6];
    expect(await run(engine, first, 3)).toMatchObject({ cachedTokens: 0, completionTokens: 3 });
    // The state is the prompt and the generated tokens but the last (sampled, not yet evaluated).
    expect(sequence.contextTokens).toEqual([...first, 100, 101]);

    // The next turn spells the reply otherwise after one token: the state diverges inside the generated tail.
    const second = [...first, 100, 150, 7, 8];
    expect(await run(engine, second, 2)).toMatchObject({ cachedTokens: 7, promptTokens: 10 });
    expect(sequence.erased.at(-1)).toEqual([{ start: 7, end: 8 }]);
    expect(sequence.evaluated.at(-1)).toEqual([150, 7, 8]);
    expect(sequence.contextTokens.slice(0, second.length)).toEqual(second);
    expect(free.evaluated).toEqual([]); // the free slot was there and stayed free
  });

  it("evaluates at least the last prompt token, for the logits of the first reply token", async () => {
    const sequence = new ScriptedSequence();
    const engine = await LlamaEngine.create(scriptedModel([sequence]), SHAPE);
    await run(engine, [1, 2, 3], 2);
    expect(await run(engine, [1, 2, 3], 2)).toMatchObject({ cachedTokens: 2 });
    expect(sequence.evaluated.at(-1)).toEqual([3]);
  });

  it("reports as cached only what llama.cpp did not decode again", async () => {
    const sequence = new ScriptedSequence(true);
    const engine = await LlamaEngine.create(scriptedModel([sequence]), SHAPE);
    await run(engine, [1, 2, 3, 4, 5, 6], 3);
    // The cut fails and node-llama-cpp re-evaluates the 7 kept tokens: none of them came from the cache.
    const result = await run(engine, [1, 2, 3, 4, 5, 6, 100, 7], 1);
    expect(sequence.evaluated.at(-1)).toEqual([7]);
    expect(result).toMatchObject({ cachedTokens: 0, promptTokens: 8 });
  });

  it("ends on an end-of-generation token, unless ignore_eos decodes past it to max_tokens", async () => {
    // The scripted model generates 100, 101, 102, ...: 102 is its end of generation.
    const engine = await LlamaEngine.create(scriptedModel([new ScriptedSequence()], 102), SHAPE);
    expect(await run(engine, [1, 2, 3], 10)).toMatchObject({ completionTokens: 2, finishReason: "stop" });
    const exact = await engine.generate({
      prompt: [4, 5, 6],
      maxTokens: 10,
      sampling: { temperature: 0 },
      ignoreEos: true,
      signal: new AbortController().signal,
    });
    expect(exact).toMatchObject({ completionTokens: 10, finishReason: "length" });
  });
});
