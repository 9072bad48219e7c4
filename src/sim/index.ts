// In-process API of the simulated vLLM engine: start one on a port, inject faults, read its counters, close it.
import type { SimScript } from "./script.js";
import { systemClock, type Clock } from "../core/clock.js";
import type { Subscribe } from "../core/change-signal.js";
import type { ServerCounters } from "../surface/counters.js";
import { SeededRandom } from "../core/random.js";
import { SIM_DEFAULTS } from "./defaults.js";
import { EngineLoop } from "./engine-loop.js";
import type { KvEventEncoding } from "../kv-events/wire.js";
import { KvEventPublisher } from "./kv-event-publisher.js";
import { KvEventRecorder } from "./kv-event-recorder.js";
import type { KvEventsConfig } from "./kv-events-config.js";
import { VllmBlockHasher, type PrefixCachingHashAlgo } from "./vllm-block-hash.js";
import type { SimFault } from "./faults.js";
import { SimMetrics } from "./metrics.js";
import { getProfile, type SimProfile } from "./profiles.js";
import { Scheduler } from "./scheduler.js";
import { SimServer } from "./server.js";
import { SimTimeline } from "./sim-timeline.js";
import { mixSeed } from "./text-generator.js";
import { DEFAULT_TOOL_CALL_RATES } from "./tool-calls.js";
import type { ToolTypeSupport } from "./responses-tools.js";
import type { SystemMessagesMode } from "../surface/messages-request.js";

export type { SimFault } from "./faults.js";
export { parseFault, parseFaultSpec } from "./faults.js";
export type { SimProfile, CostModel } from "./profiles.js";
export { PROFILES, PROFILE_NAMES, getProfile } from "./profiles.js";

export interface SimEngineOptions {
  /** Interface to bind (default 127.0.0.1). */
  host?: string;
  /** TCP port; 0 (the default) lets the OS pick one. */
  port?: number;
  /** One of PROFILE_NAMES (default "instant"). */
  profile?: string;
  /** Simulated ms per wall ms: 10 runs the engine ten times faster than the modelled GPU (default 1). */
  timeScale?: number;
  /** Served model id (default: the profile's, e.g. "Qwen/Qwen2.5-7B-Instruct"). */
  model?: string;
  /** Seeds reply text, reply lengths and injected-error dice (default 0). */
  seed?: number;
  maxNumSeqs?: number;
  kvCapacityBlocks?: number;
  maxNumBatchedTokens?: number;
  maxModelLen?: number;
  /**
   * Chance that a chat request offering tools (tool_choice auto) gets a tool call when its last message is not a
   * tool result (default 1).
   */
  toolCallRate?: number;
  /** The same chance right after a tool result (default 0: the model answers in text, so agent loops end). */
  toolCallRateAfterToolResult?: number;
  /** Chance of each further call in the same message, up to 3 (default 0: one call at a time). */
  parallelToolCallRate?: number;
  /**
   * Whose Responses API tool handling to follow: "vllm" (the default: vLLM >= 0.25.1 with most models) or
   * "gpt-oss" (vLLM's harmony path, which refuses namespace, web_search and other non-function tools).
   */
  toolTypes?: ToolTypeSupport;
  /**
   * What a `role: "system"` message inside a Messages request's `messages` gets: "render" (the default: a system
   * turn where it stands, as vLLM 0.24 to 0.25.1) or "refuse" (the 400 of vLLM before 0.24).
   */
  systemMessages?: SystemMessagesMode;
  /** Scripted mode: replies follow this script's conversations (see loadScript in script.ts). */
  script?: SimScript;
  /** Fault in force from the start (default none). */
  fault?: SimFault;
  /** Called after a `die` fault has taken the engine down; the CLI exits the process here. */
  onDie?: () => void;
  /** Wall clock the simulated time is derived from (tests may inject one; default the system clock). */
  wallClock?: Clock;
  /** vLLM's `--kv-events-config`: publish KV events over ZMQ (default off). */
  kvEvents?: SimKvEventsOptions;
}

export interface SimKvEventsOptions {
  readonly config: KvEventsConfig;
  /** "map" (vLLM 0.26, the default) or "array" (vLLM before the May 2026 change). */
  readonly encoding?: KvEventEncoding;
  /** vLLM's `--prefix-caching-hash-algo` (default sha256). */
  readonly hashAlgo?: PrefixCachingHashAlgo;
  /** vLLM reads PYTHONHASHSEED; unset: NONE_HASH is random per engine, as in vLLM. */
  readonly pythonHashSeed?: string | undefined;
}

/** Where an engine publishes its KV events (what a gateway subscribes to). */
export interface SimKvEventsInfo {
  readonly endpoint: string;
  readonly replayEndpoint: string | undefined;
  readonly topic: string;
  readonly encoding: KvEventEncoding;
  readonly hashAlgo: PrefixCachingHashAlgo;
  readonly blockSizeTokens: number;
}

/** The server's counters (src/surface/counters.ts) and the engine's own state. */
export interface SimEngineStats extends ServerCounters {
  running: number;
  waiting: number;
  /** Fraction of KV blocks pinned by running requests. */
  kvCacheUsage: number;
  kvCapacityBlocks: number;
  /** Cached blocks in the prefix index right now. */
  kvCachedBlocks: number;
  evictedBlocks: number;
  preemptions: number;
  /** Engine-side totals, as /metrics reports them. */
  prefixCacheQueries: number;
  prefixCacheHits: number;
  steps: number;
  /** Simulated time since start, in ms. */
  simTimeMs: number;
}

export interface SimEngineHandle {
  /** Origin of the engine, e.g. "http://127.0.0.1:40123"; the OpenAI base URL is `${url}/v1`. */
  readonly url: string;
  readonly port: number;
  readonly model: string;
  readonly profile: SimProfile;
  /** Stops listening, drops connections, aborts work; resolves when the port is free. Safe to call twice. */
  close(): Promise<void>;
  setFault(fault: SimFault): void;
  fault(): SimFault;
  stats(): SimEngineStats;
  /** Where KV events are published; undefined when they are off. */
  readonly kvEvents: SimKvEventsInfo | undefined;
  /** vLLM's reset_prefix_cache: false while blocks are in use (nothing changes then). */
  resetPrefixCache(): boolean;
  /** Calls `listener` whenever stats() may have changed (a request received, a step, an abort, an outcome). */
  readonly onChange: Subscribe;
}

function urlHost(host: string): string {
  if (host === "0.0.0.0" || host === "::" || host === "") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}

export async function startSimEngine(options: SimEngineOptions = {}): Promise<SimEngineHandle> {
  const profile = getProfile(options.profile ?? SIM_DEFAULTS.profile);
  const model = options.model ?? profile.model;
  const seed = options.seed ?? SIM_DEFAULTS.seed;
  const host = options.host ?? SIM_DEFAULTS.host;
  const kvCapacityBlocks = options.kvCapacityBlocks ?? profile.kvCapacityBlocks;
  const maxModelLen = options.maxModelLen ?? profile.maxModelLen;

  const wallClock = options.wallClock ?? systemClock;
  const timeline = new SimTimeline(wallClock, options.timeScale ?? SIM_DEFAULTS.timeScale);
  const events = options.kvEvents;
  const recorder =
    events === undefined
      ? undefined
      : new KvEventRecorder(
          new VllmBlockHasher({ algo: events.hashAlgo ?? "sha256", pythonHashSeed: events.pythonHashSeed }),
          SIM_DEFAULTS.blockSizeTokens,
          kvCapacityBlocks,
        );
  const publisher =
    events === undefined
      ? undefined
      : await KvEventPublisher.start({
          config: events.config,
          encoding: events.encoding ?? "map",
          clock: wallClock,
          onError: (err) => process.emitWarning(`sim KV-event publisher failed: ${String(err)}`),
        });
  const publishEvents = (): void => {
    if (recorder !== undefined) publisher?.publish(recorder.take());
  };
  const kvEventsInfo: SimKvEventsInfo | undefined =
    publisher === undefined || events === undefined
      ? undefined
      : {
          endpoint: publisher.endpoint,
          replayEndpoint: publisher.replayEndpoint,
          topic: events.config.topic,
          encoding: events.encoding ?? "map",
          hashAlgo: events.hashAlgo ?? "sha256",
          blockSizeTokens: SIM_DEFAULTS.blockSizeTokens,
        };
  const resetPrefixCache = (): boolean => {
    const done = scheduler.kv.resetPrefixCache();
    publishEvents();
    return done;
  };
  const scheduler = new Scheduler(
    {
      maxNumSeqs: options.maxNumSeqs ?? profile.maxNumSeqs,
      maxNumBatchedTokens: options.maxNumBatchedTokens ?? profile.maxNumBatchedTokens,
      kvCapacityBlocks,
      blockSizeTokens: SIM_DEFAULTS.blockSizeTokens,
      cost: profile.cost,
    },
    timeline,
    recorder,
  );
  const metrics = new SimMetrics({
    model,
    engineLabel: SIM_DEFAULTS.engineLabel,
    blockSizeTokens: SIM_DEFAULTS.blockSizeTokens,
    kvCapacityBlocks,
    scheduler,
  });
  const loop = new EngineLoop(scheduler, timeline, {
    onStep: () => {
      publishEvents();
      server.changes.notify();
    },
    onFinish: (request) => metrics.observeFinished(request),
    onListenerError: (err) => process.emitWarning(`sim engine listener failed: ${String(err)}`),
  });
  const server = new SimServer({
    model,
    profile,
    maxModelLen,
    seed,
    loop,
    metrics,
    random: new SeededRandom(mixSeed(seed, 0x6661756c)),
    toolCallRates: {
      afterUser: options.toolCallRate ?? DEFAULT_TOOL_CALL_RATES.afterUser,
      afterToolResult: options.toolCallRateAfterToolResult ?? DEFAULT_TOOL_CALL_RATES.afterToolResult,
      parallel: options.parallelToolCallRate ?? DEFAULT_TOOL_CALL_RATES.parallel,
      maxParallel: DEFAULT_TOOL_CALL_RATES.maxParallel,
    },
    toolTypes: options.toolTypes,
    systemMessages: options.systemMessages,
    script: options.script,
    onDie: options.onDie,
    kvEvents: () => kvEventsInfo ?? { enabled: false },
    resetPrefixCache: () => resetPrefixCache(),
  });
  if (options.fault && options.fault.kind !== "die") server.setFault(options.fault);
  let port: number;
  try {
    port = await server.listen(host, options.port ?? SIM_DEFAULTS.port);
  } catch (err) {
    publisher?.close();
    throw err;
  }
  if (options.fault?.kind === "die") server.setFault(options.fault);

  return {
    url: `http://${urlHost(host)}:${port}`,
    port,
    model,
    profile,
    close: async () => {
      await server.close();
      publisher?.close();
    },
    kvEvents: kvEventsInfo,
    resetPrefixCache,
    setFault: (fault) => server.setFault(fault),
    onChange: server.changes.subscribe,
    fault: () => server.currentFault,
    stats: () => {
      const totals = scheduler.totals;
      const pool = scheduler.kv.pool;
      return {
        ...server.counters,
        running: scheduler.numRunning,
        waiting: scheduler.numWaiting,
        kvCacheUsage: pool.usage,
        kvCapacityBlocks,
        kvCachedBlocks: pool.numCachedBlocks,
        evictedBlocks: pool.evictedBlocks,
        preemptions: totals.preemptions,
        prefixCacheQueries: totals.prefixCacheQueries,
        prefixCacheHits: totals.prefixCacheHits,
        steps: totals.steps,
        simTimeMs: timeline.nowMs(),
      };
    },
  };
}
