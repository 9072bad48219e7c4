// `agent-serve engine`: a real OpenAI-compatible engine over llama.cpp (CPU); `engine make-model` writes its model.
import { parseArgs, type ParseArgsConfig } from "node:util";
import { waitForStopSignal } from "../cli/stop-signal.js";
import { UsageError, type Command } from "../cli/command.js";
import { ENGINE_DEFAULTS } from "./defaults.js";
import { EngineUnavailableError, startRealEngine, type RealEngineOptions } from "./index.js";
import {
  DEFAULT_MODEL_SEED,
  DEFAULT_MODEL_SIZE,
  defaultModelPath,
  makeModel,
  MODEL_SIZE_NAMES,
} from "./model-maker.js";

const HELP = `usage: agent-serve engine [flags]
       agent-serve engine make-model FILE [--size NAME] [--seed N]

Runs a real OpenAI-compatible engine: llama.cpp on the CPU (through the optional package node-llama-cpp),
chat and text completions (/v1/chat/completions, /v1/completions) streaming and not, /v1/models, /health and
vLLM-named /metrics. Its slots keep their KV state between requests and reuse the longest common prefix of the
next prompt; usage reports it as cached_tokens.
Without --model it serves a generated LLaMA-architecture model with random weights and GPT-2's vocabulary
(made on first use in ${defaultModelPath()} and the like): the text is meaningless, the compute and the
caching are real.

flags:
  --port N                 TCP port (default ${ENGINE_DEFAULTS.cliPort}; 0 picks a free one)
  --host H                 interface to bind (default ${ENGINE_DEFAULTS.host})
  --model FILE             a GGUF model file (default: the generated model of --size)
  --size NAME              generated model without --model: ${MODEL_SIZE_NAMES.join(", ")} (default ${DEFAULT_MODEL_SIZE})
  --served-model-name ID   model id clients send (default: the file name without .gguf)
  --slots N                sequences decoded together, each keeping its own prefix (default ${ENGINE_DEFAULTS.slots})
  --ctx-size N             tokens per slot: prompt plus max_tokens (default ${ENGINE_DEFAULTS.ctxSize})
  --batch-size N           prompt tokens per llama.cpp batch (default ${ENGINE_DEFAULTS.batchSize})
  --threads N              CPU threads (default: the cores, ${ENGINE_DEFAULTS.threads()} here); several engines on
                           one machine should share the cores, not each take all of them
  -h, --help               show this help

make-model FILE writes the generated model (GGUF, q8_0) to FILE: the same --size and --seed (default
${DEFAULT_MODEL_SEED}) always give the same bytes; 'small' is about 80M parameters and 85 MB, made in seconds.

Needs node-llama-cpp with a prebuilt binary for this platform (npm installs it as an optional dependency);
where it cannot load, the command says why and exits 1. It prints one line when listening and stops cleanly
on SIGINT or SIGTERM.`;

function wholeNumber(value: string | undefined, flag: string, min: number): number | undefined {
  if (value === undefined) return undefined;
  const parsed = Number(value);
  if (value.trim() === "" || !Number.isInteger(parsed) || parsed < min) {
    throw new UsageError(`--${flag} needs a whole number >= ${min} (got '${value}')`);
  }
  return parsed;
}

function sizeFlag(value: string | undefined): string {
  const size = value ?? DEFAULT_MODEL_SIZE;
  if (!MODEL_SIZE_NAMES.includes(size))
    throw new UsageError(`unknown --size '${size}' (known: ${MODEL_SIZE_NAMES.join(", ")})`);
  return size;
}

function parse(argv: string[], options: NonNullable<ParseArgsConfig["options"]>) {
  try {
    return parseArgs({ args: argv, strict: true, allowPositionals: true, options });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
}

/** Parses the serving flags; throws UsageError on anything malformed. */
export function parseEngineArgs(argv: string[]): RealEngineOptions {
  const { values, positionals } = parse(argv, {
    port: { type: "string" },
    host: { type: "string" },
    model: { type: "string" },
    size: { type: "string" },
    "served-model-name": { type: "string" },
    slots: { type: "string" },
    "ctx-size": { type: "string" },
    "batch-size": { type: "string" },
    threads: { type: "string" },
  });
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  const text = (key: string): string | undefined => {
    const value = values[key];
    return typeof value === "string" ? value : undefined;
  };
  const port = wholeNumber(text("port"), "port", 0) ?? ENGINE_DEFAULTS.cliPort;
  if (port > 65_535) throw new UsageError(`--port must be at most 65535 (got ${port})`);
  if (text("model") !== undefined && text("size") !== undefined) {
    throw new UsageError("--size names a generated model: give it or --model, not both");
  }
  const served = text("served-model-name");
  if (served !== undefined && served.trim() === "") throw new UsageError("--served-model-name needs an id");
  const options: RealEngineOptions = {
    host: text("host") ?? ENGINE_DEFAULTS.host,
    port,
    modelSize: sizeFlag(text("size")),
    slots: wholeNumber(text("slots"), "slots", 1),
    ctxSize: wholeNumber(text("ctx-size"), "ctx-size", 16),
    batchSize: wholeNumber(text("batch-size"), "batch-size", 1),
    threads: wholeNumber(text("threads"), "threads", 1),
  };
  const model = text("model");
  if (model !== undefined) options.modelPath = model;
  if (served !== undefined) options.servedModelName = served;
  return options;
}

async function runMakeModel(argv: string[]): Promise<number> {
  const { values, positionals } = parse(argv, { size: { type: "string" }, seed: { type: "string" } });
  if (positionals.length !== 1) throw new UsageError("make-model needs exactly one FILE");
  const size = sizeFlag(typeof values["size"] === "string" ? values["size"] : undefined);
  const seed =
    wholeNumber(typeof values["seed"] === "string" ? values["seed"] : undefined, "seed", 0) ??
    DEFAULT_MODEL_SEED;
  const made = await makeModel(positionals[0]!, size, seed);
  process.stdout.write(
    `agent-serve engine make-model: wrote ${made.path} (${size}, seed ${seed}, ` +
      `${(made.parameters / 1e6).toFixed(1)}M parameters, ${(made.bytes / 1e6).toFixed(1)} MB, ` +
      `${made.seconds.toFixed(1)} s)\n`,
  );
  return 0;
}

export const engineCommand: Command = {
  name: "engine",
  help: HELP,
  async run(argv) {
    if (argv[0] === "make-model") return runMakeModel(argv.slice(1));
    const options = parseEngineArgs(argv);
    let handle;
    try {
      handle = await startRealEngine(options);
    } catch (err) {
      if (!(err instanceof EngineUnavailableError)) throw err;
      process.stderr.write(`agent-serve engine: ${err.message}\n`);
      return 1;
    }
    const { slots, ctxSize, threads } = handle.shape;
    process.stdout.write(
      `agent-serve engine: listening on ${handle.url} (model ${handle.model} from ${handle.modelPath}, ` +
        `${slots} slots of ${ctxSize} tokens, ${threads} threads)\n`,
    );
    // As vLLM does, each abandoned request is said (and tests wait on the line rather than poll the metrics).
    let aborted = 0;
    handle.onChange(() => {
      for (; aborted < handle.stats().requestsAborted; aborted++)
        process.stdout.write("agent-serve engine: aborted a request (its client left)\n");
    });
    await waitForStopSignal();
    await handle.close();
    return 0;
  },
};
