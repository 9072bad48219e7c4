// Loads llama.cpp through the optional package node-llama-cpp, CPU only, with a clear error where it cannot load.
//
// node-llama-cpp is an optional dependency with prebuilt binaries per platform: on a machine without one, the rest
// of agent-serve still builds, type-checks and runs. So this module names only the few parts of its API that the
// engine uses (below, checked by the real-engine test in CI) and imports the package at run time.
import { availableParallelism } from "node:os";
import { GatewayError } from "../core/errors.js";

export const LLAMA_PACKAGE = "node-llama-cpp";

export interface LlamaSequence {
  /** Tokens per sequence (each slot is one sequence). */
  readonly contextSize: number;
  /** Where the next evaluated token goes: the length of the cached state. */
  readonly nextTokenIndex: number;
  /** The tokens whose KV state the sequence holds. */
  readonly contextTokens: readonly number[];
  /** Tokens decoded into this sequence so far; those whose logits were read count as output. */
  readonly tokenMeter: { readonly usedInputTokens: number; readonly usedOutputTokens: number };
  eraseContextTokenRanges(ranges: { start: number; end: number }[]): Promise<void>;
  /** Evaluates `tokens` after the cached state, then yields one sampled token per iteration. */
  evaluate(
    tokens: number[],
    options?: { temperature?: number; topP?: number; topK?: number; seed?: number },
  ): AsyncGenerator<number, void, void>;
  dispose(): Promise<void>;
}

export interface LlamaContext {
  getSequence(): LlamaSequence;
  dispose(): Promise<void>;
}

export interface LlamaModel {
  /** Text to token ids; `specialTokens` lets `<|im_start|>` and the like become their control tokens. */
  tokenize(text: string, specialTokens?: boolean): number[];
  detokenize(tokens: readonly number[], specialTokens?: boolean): string;
  isEogToken(token: number): boolean;
  readonly trainContextSize: number;
  /** The GGUF file's metadata: its vocabulary (`tokenizer.ggml.tokens`) says which token ids exist. */
  readonly fileInfo: {
    readonly metadata: { readonly tokenizer?: { readonly ggml?: { readonly tokens?: readonly unknown[] } } };
  };
  createContext(options: {
    sequences: number;
    contextSize: number;
    batchSize: number;
    threads: number;
  }): Promise<LlamaContext>;
  dispose(): Promise<void>;
}

export interface Llama {
  loadModel(options: { modelPath: string }): Promise<LlamaModel>;
  dispose(): Promise<void>;
}

interface NodeLlamaCppModule {
  getLlama(options: {
    gpu: false;
    build: "never";
    usePrebuiltBinaries: true;
    skipDownload: true;
    progressLogs: false;
    logLevel: "error";
    maxThreads: number;
  }): Promise<Llama>;
}

/** node-llama-cpp is missing or cannot load llama.cpp here: `agent-serve engine` prints this and exits 1. */
export class EngineUnavailableError extends GatewayError {
  override name = "EngineUnavailableError";
  constructor(message: string) {
    super("engine_unavailable", message);
  }
}

let loading: Promise<Llama> | undefined;

/**
 * The process's one llama.cpp binding (engines in one process share it; each has its own model and context).
 * `maxThreads` caps the threads of all of them together: more threads than cores stall decoding.
 */
export function loadLlama(maxThreads: number = availableParallelism()): Promise<Llama> {
  loading ??= load(maxThreads);
  loading.catch(() => (loading = undefined));
  return loading;
}

async function load(maxThreads: number): Promise<Llama> {
  const where = `${process.platform}-${process.arch}, Node ${process.versions.node}`;
  let module: NodeLlamaCppModule;
  try {
    // A specifier the compiler does not resolve: the package is optional.
    const specifier: string = LLAMA_PACKAGE;
    module = (await import(specifier)) as NodeLlamaCppModule;
  } catch (err) {
    throw new EngineUnavailableError(
      `the real engine needs the optional package ${LLAMA_PACKAGE}, which is not installed here (${where}). ` +
        `Install it with \`npm install\` (it is in optionalDependencies) on a platform it ships binaries for. ` +
        `(${err instanceof Error ? err.message : String(err)})`,
    );
  }
  try {
    return await module.getLlama({
      gpu: false,
      build: "never",
      usePrebuiltBinaries: true,
      skipDownload: true,
      progressLogs: false,
      logLevel: "error",
      maxThreads,
    });
  } catch (err) {
    throw new EngineUnavailableError(
      `${LLAMA_PACKAGE} is installed but has no usable prebuilt llama.cpp CPU binary for ${where} ` +
        `(agent-serve never builds llama.cpp from source): ${err instanceof Error ? err.message : String(err)}`,
    );
  }
}
