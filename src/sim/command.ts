// `agent-serve sim`: runs one simulated vLLM engine as a process until SIGINT/SIGTERM (or a `die` fault).
import { parseArgs } from "node:util";
import { parentGone, reportReady } from "../cli/parent-link.js";
import { waitForStopSignal } from "../cli/stop-signal.js";
import { UsageError, type Command } from "../cli/command.js";
import { SIM_DEFAULTS } from "./defaults.js";
import { parseFaultSpec, type SimFault } from "./faults.js";
import { startSimEngine, type SimEngineOptions } from "./index.js";
import { PROFILE_NAMES, PROFILES } from "./profiles.js";
import { isToolTypeSupport, TOOL_TYPE_SUPPORTS } from "./responses-tools.js";
import { loadScript, type SimScript } from "./script.js";
import { KV_EVENT_ENCODINGS, type KvEventEncoding } from "../kv-events/wire.js";
import { parseKvEventsConfig } from "./kv-events-config.js";
import {
  PREFIX_CACHING_HASH_ALGOS,
  UNSUPPORTED_HASH_ALGOS,
  type PrefixCachingHashAlgo,
} from "./vllm-block-hash.js";

const HELP = `usage: agent-serve sim [flags]

Runs a simulated vLLM engine: vLLM's OpenAI-compatible HTTP API over a paged prefix KV cache and a continuous-
batching scheduler whose step times come from a GPU cost model. No GPU needed.

flags:
  --port N                     TCP port (default ${SIM_DEFAULTS.cliPort}; 0 picks a free one)
  --host H                     interface to bind (default ${SIM_DEFAULTS.host})
  --profile NAME               cost model and limits: ${PROFILE_NAMES.join(", ")} (default ${SIM_DEFAULTS.profile})
  --time-scale X               run X times faster than the modelled GPU; metrics stay in simulated time
                               (default ${SIM_DEFAULTS.timeScale})
  --model ID                   served model id (default: the profile's, e.g. ${PROFILES["qwen2.5-7b"]?.model ?? ""})
  --seed N                     seed of reply text, reply lengths and injected-error dice (default ${SIM_DEFAULTS.seed})
  --max-num-seqs N             most sequences running at once (default: the profile's)
  --max-num-batched-tokens N   token budget of one engine step, i.e. the chunked-prefill size (default: profile's)
  --kv-blocks N                KV cache capacity in blocks of ${SIM_DEFAULTS.blockSizeTokens} tokens (default: the profile's)
  --max-model-len N            context window in tokens (default: the profile's)
  --tool-call-rate X           chance (0-1) of a tool call when a request offers tools and its last message is
                               not a tool result (default 1)
  --tool-call-rate-after-result X
                               the same chance right after a tool result (default 0: the model then answers in text)
  --parallel-tool-call-rate X  chance of each further call in one message, up to 3 (default 0)
  --tool-types KIND            Responses API tool types accepted as by: vllm (default; namespaces flattened,
                               hosted tools such as web_search accepted and never called) | gpt-oss (vLLM's
                               harmony path: 400 "tool type namespace not supported" and the like)
  --system-messages MODE       a role "system" message inside /v1/messages' messages: render (default; a system
                               turn where it stands, as vLLM 0.24 to 0.25.1) | refuse (400, as vLLM before 0.24)
  --script FILE                scripted mode: replies follow the conversations of this YAML or JSON file (tool calls
                               and text, turn by turn), to drive a real coding agent through a known trajectory
  --kv-events-config JSON      vLLM's flag: publish KV events over ZMQ, e.g. '{"enable_kv_cache_events":true,
                               "publisher":"zmq","endpoint":"tcp://*:5557","topic":"kv-events"}' (keys: endpoint,
                               replay_endpoint, buffer_steps, hwm, max_queue_size, topic; a tcp port 0 binds an
                               OS-assigned port). Block hashes use PYTHONHASHSEED from the environment as vLLM does
  --kv-events-encoding KIND    events as maps with a "type" key (map: vLLM 0.26, default) or positional arrays
                               (array: vLLM before May 2026)
  --prefix-caching-hash-algo A block hash of the KV events: ${PREFIX_CACHING_HASH_ALGOS.join(", ")} (default sha256)
  --fault SPEC                 inject a fault: none | die | hang | slow:MS | error_rate:RATE[:STATUS] | cut_stream:N
  --fault-delay-ms N           apply --fault N ms after listening instead of at once (e.g. die after 5000)
  -h, --help                   show this help

At runtime, POST /sim/fault with {"kind":"slow","extraLatencyMs":500} (etc.) changes the fault; GET /sim/stats
shows counters. The command prints one line when it is listening and stops cleanly on SIGINT or SIGTERM;
a 'die' fault makes the process exit at once with status 1.`;

interface SimCommandOptions {
  engine: SimEngineOptions;
  fault: SimFault | undefined;
  faultDelayMs: number;
}

function integer(value: string | undefined, flag: string, min: number): number | undefined {
  if (value === undefined) return undefined;
  const parsed = Number(value);
  if (value.trim() === "" || !Number.isInteger(parsed) || parsed < min) {
    throw new UsageError(`--${flag} needs a whole number >= ${min} (got '${value}')`);
  }
  return parsed;
}

function rate(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const parsed = Number(value);
  if (value.trim() === "" || !(parsed >= 0 && parsed <= 1)) {
    throw new UsageError(`--${flag} needs a number from 0 to 1 (got '${value}')`);
  }
  return parsed;
}

/** Parses the command's flags; throws UsageError on anything malformed. */
export function parseSimArgs(argv: string[], env: NodeJS.ProcessEnv = process.env): SimCommandOptions {
  let values: Record<string, string | undefined>;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: {
        port: { type: "string" },
        host: { type: "string" },
        profile: { type: "string" },
        "time-scale": { type: "string" },
        model: { type: "string" },
        seed: { type: "string" },
        "max-num-seqs": { type: "string" },
        "max-num-batched-tokens": { type: "string" },
        "kv-blocks": { type: "string" },
        "max-model-len": { type: "string" },
        "tool-call-rate": { type: "string" },
        "tool-call-rate-after-result": { type: "string" },
        "parallel-tool-call-rate": { type: "string" },
        "tool-types": { type: "string" },
        "system-messages": { type: "string" },
        script: { type: "string" },
        fault: { type: "string" },
        "fault-delay-ms": { type: "string" },
        "kv-events-config": { type: "string" },
        "kv-events-encoding": { type: "string" },
        "prefix-caching-hash-algo": { type: "string" },
      },
    }));
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }

  const profile = values["profile"] ?? SIM_DEFAULTS.profile;
  if (!PROFILE_NAMES.includes(profile)) {
    throw new UsageError(`unknown --profile '${profile}' (known: ${PROFILE_NAMES.join(", ")})`);
  }
  let timeScale: number | undefined;
  if (values["time-scale"] !== undefined) {
    timeScale = Number(values["time-scale"]);
    if (!(timeScale > 0) || !Number.isFinite(timeScale)) {
      throw new UsageError(`--time-scale needs a positive number (got '${values["time-scale"]}')`);
    }
  }
  const model = values["model"];
  if (model !== undefined && model.trim() === "") throw new UsageError("--model needs a non-empty id");
  let fault: SimFault | undefined;
  if (values["fault"] !== undefined) {
    try {
      fault = parseFaultSpec(values["fault"]);
    } catch (err) {
      throw new UsageError(`--fault: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  const faultDelayMs = integer(values["fault-delay-ms"], "fault-delay-ms", 0) ?? 0;
  if (values["fault-delay-ms"] !== undefined && fault === undefined) {
    throw new UsageError("--fault-delay-ms needs --fault");
  }
  const toolTypes = values["tool-types"];
  if (toolTypes !== undefined && !isToolTypeSupport(toolTypes)) {
    throw new UsageError(`unknown --tool-types '${toolTypes}' (known: ${TOOL_TYPE_SUPPORTS.join(", ")})`);
  }
  const systemMessages = values["system-messages"];
  if (systemMessages !== undefined && systemMessages !== "render" && systemMessages !== "refuse") {
    throw new UsageError(`unknown --system-messages '${systemMessages}' (known: render, refuse)`);
  }
  let script: SimScript | undefined;
  if (values["script"] !== undefined) {
    try {
      script = loadScript(values["script"]);
    } catch (err) {
      throw new UsageError(`--script: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  const kvEvents = parseKvEventFlags(values, env);
  const port = integer(values["port"], "port", 0) ?? SIM_DEFAULTS.cliPort;
  if (port > 65_535) throw new UsageError(`--port must be at most 65535 (got ${port})`);

  return {
    engine: {
      host: values["host"] ?? SIM_DEFAULTS.host,
      port,
      profile,
      timeScale,
      model,
      seed: integer(values["seed"], "seed", 0),
      maxNumSeqs: integer(values["max-num-seqs"], "max-num-seqs", 1),
      maxNumBatchedTokens: integer(values["max-num-batched-tokens"], "max-num-batched-tokens", 1),
      kvCapacityBlocks: integer(values["kv-blocks"], "kv-blocks", 1),
      maxModelLen: integer(values["max-model-len"], "max-model-len", 2),
      toolCallRate: rate(values["tool-call-rate"], "tool-call-rate"),
      toolCallRateAfterToolResult: rate(values["tool-call-rate-after-result"], "tool-call-rate-after-result"),
      parallelToolCallRate: rate(values["parallel-tool-call-rate"], "parallel-tool-call-rate"),
      toolTypes,
      systemMessages,
      script,
      kvEvents,
    },
    fault,
    faultDelayMs,
  };
}

/** --kv-events-config and its companions; undefined when events stay off. */
function parseKvEventFlags(
  values: Record<string, string | undefined>,
  env: NodeJS.ProcessEnv,
): SimEngineOptions["kvEvents"] {
  const encoding = values["kv-events-encoding"];
  if (encoding !== undefined && !(KV_EVENT_ENCODINGS as readonly string[]).includes(encoding)) {
    throw new UsageError(
      `unknown --kv-events-encoding '${encoding}' (known: ${KV_EVENT_ENCODINGS.join(", ")})`,
    );
  }
  const algo = values["prefix-caching-hash-algo"];
  if (algo !== undefined && !(PREFIX_CACHING_HASH_ALGOS as readonly string[]).includes(algo)) {
    const why = (UNSUPPORTED_HASH_ALGOS as readonly string[]).includes(algo)
      ? "vLLM's xxh3-128 hashes are not computed by the simulator"
      : `known: ${PREFIX_CACHING_HASH_ALGOS.join(", ")}`;
    throw new UsageError(`--prefix-caching-hash-algo '${algo}' is not supported (${why})`);
  }
  const json = values["kv-events-config"];
  if (json === undefined) return undefined;
  const config = parseKvEventsConfig(json);
  if (config === undefined) return undefined;
  return {
    config,
    encoding: encoding as KvEventEncoding | undefined,
    hashAlgo: algo as PrefixCachingHashAlgo | undefined,
    pythonHashSeed: env["PYTHONHASHSEED"],
  };
}

export const simCommand: Command = {
  name: "sim",
  help: HELP,
  async run(argv: string[]): Promise<number> {
    const options = parseSimArgs(argv);
    // Stopped by a signal, or by the end of the `agent-serve start` that spawned it.
    const stopped = Promise.race([waitForStopSignal(), parentGone()]);
    const immediateFault = options.faultDelayMs === 0 ? options.fault : undefined;
    const handle = await startSimEngine({
      ...options.engine,
      fault: immediateFault,
      onDie: () => {
        process.stderr.write("agent-serve sim: fault 'die': exiting\n");
        process.exit(1);
      },
    });
    process.stdout.write(
      `agent-serve sim: listening on ${handle.url} (profile ${handle.profile.name}, model ${handle.model}, ` +
        `time-scale ${options.engine.timeScale ?? SIM_DEFAULTS.timeScale})\n`,
    );
    if (handle.kvEvents !== undefined) {
      const replay = handle.kvEvents.replayEndpoint;
      process.stdout.write(
        `agent-serve sim: KV events on ${handle.kvEvents.endpoint}` +
          `${replay === undefined ? "" : ` (replay ${replay})`}, ${handle.kvEvents.encoding} encoding\n`,
      );
    }
    reportReady(handle.url);
    let faultTimer: NodeJS.Timeout | undefined;
    const delayedFault = options.faultDelayMs > 0 ? options.fault : undefined;
    if (delayedFault) faultTimer = setTimeout(() => handle.setFault(delayedFault), options.faultDelayMs);
    await stopped;
    if (faultTimer) clearTimeout(faultTimer);
    await handle.close();
    // The IPC channel to a parent would keep the process alive.
    if (process.connected) process.disconnect();
    return 0;
  },
};
