// In-process API of the real (llama.cpp) engine: start one on a port, read its counters, close it.
import { basename, extname } from "node:path";
import type { Subscribe } from "../core/change-signal.js";
import { ENGINE_DEFAULTS } from "./defaults.js";
import { loadLlama } from "./llama-binding.js";
import { LlamaEngine, type EngineShape } from "./llama-engine.js";
import { EngineMetrics } from "./metrics.js";
import { DEFAULT_MODEL_SIZE, ensureModel } from "./model-maker.js";
import { EngineServer, type EngineCounters } from "./server.js";

export { EngineUnavailableError } from "./llama-binding.js";
export { MODEL_SIZE_NAMES, defaultModelPath, ensureModel, makeModel } from "./model-maker.js";

export interface RealEngineOptions {
  /** Interface to bind (default 127.0.0.1). */
  host?: string;
  /** TCP port; 0 (the default) lets the OS pick one. */
  port?: number;
  /** A GGUF file; without it, the generated random-weight model of `modelSize` (made on first use). */
  modelPath?: string;
  /** Size of the generated model when no `modelPath` is given (default "small"). */
  modelSize?: string;
  /** Served model id (default: the model file's name without `.gguf`). */
  servedModelName?: string;
  slots?: number;
  ctxSize?: number;
  batchSize?: number;
  threads?: number;
}

export interface RealEngineStats extends EngineCounters {
  running: number;
  waiting: number;
}

export interface RealEngineHandle {
  /** Origin of the engine, e.g. "http://127.0.0.1:40123"; the OpenAI base URL is `${url}/v1`. */
  readonly url: string;
  readonly port: number;
  /** The served model id. */
  readonly model: string;
  readonly modelPath: string;
  readonly shape: EngineShape;
  /** Stops listening, drops connections, ends generations, frees the model. Safe to call twice. */
  close(): Promise<void>;
  stats(): RealEngineStats;
  /** Calls `listener` whenever a generation ended (stats() changed). */
  readonly onChange: Subscribe;
}

function urlHost(host: string): string {
  if (host === "0.0.0.0" || host === "::" || host === "") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}

/** Throws EngineUnavailableError where node-llama-cpp cannot load (not installed, no binary for this machine). */
export async function startRealEngine(options: RealEngineOptions = {}): Promise<RealEngineHandle> {
  const shape: EngineShape = {
    slots: options.slots ?? ENGINE_DEFAULTS.slots,
    ctxSize: options.ctxSize ?? ENGINE_DEFAULTS.ctxSize,
    batchSize: options.batchSize ?? ENGINE_DEFAULTS.batchSize,
    threads: options.threads ?? ENGINE_DEFAULTS.threads(),
  };
  const llama = await loadLlama();
  const modelPath = options.modelPath ?? (await ensureModel(options.modelSize ?? DEFAULT_MODEL_SIZE));
  const servedModel = options.servedModelName ?? basename(modelPath, extname(modelPath));
  const model = await llama.loadModel({ modelPath });
  let engine: LlamaEngine | undefined;
  try {
    engine = await LlamaEngine.create(model, shape);
    const running = engine;
    const metrics = new EngineMetrics(servedModel, {
      running: () => running.running,
      waiting: () => running.waiting,
    });
    const server = new EngineServer(engine, metrics, servedModel);
    const host = options.host ?? ENGINE_DEFAULTS.host;
    const port = await server.listen(host, options.port ?? ENGINE_DEFAULTS.port);
    let closing: Promise<void> | undefined;
    return {
      url: `http://${urlHost(host)}:${port}`,
      port,
      model: servedModel,
      modelPath,
      shape,
      close: () =>
        (closing ??= (async () => {
          await server.close();
          await running.dispose();
          await model.dispose();
        })()),
      stats: () => ({ ...server.counters, running: running.running, waiting: running.waiting }),
      onChange: server.changes.subscribe,
    };
  } catch (err) {
    await engine?.dispose();
    await model.dispose();
    throw err;
  }
}
