// Starts the simulated engines a config asks for as child processes, waits until they answer, stops them.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { BackendConfig } from "../config/schema.js";
import { GatewayError } from "../core/errors.js";
import { isReadyMessage } from "./parent-link.js";

/** Under tsx this module is .ts, compiled it is .js: spawn the cli file of the same kind. */
const CLI_PATH = fileURLToPath(
  new URL(import.meta.url.endsWith(".ts") ? "../cli.ts" : "../cli.js", import.meta.url),
);
const READY_TIMEOUT_MS = 20_000;

/** An engine that `start` launched did not come up: the message is the whole story, printed as one line. */
export class EngineStartError extends GatewayError {
  override name = "EngineStartError";
  constructor(message: string) {
    super("engine_start_failed", message);
  }
}

export interface EngineProcess {
  backendId: string;
  child: ChildProcess;
}

/** The simulator command line for one backend with a `simulate` block. */
export function simArgs(backend: BackendConfig): string[] {
  const sim = backend.simulate!;
  const url = new URL(backend.base_url);
  const args = ["sim", "--host", url.hostname.replace(/^\[|\]$/g, ""), "--port", url.port || "80"];
  args.push("--profile", sim.profile, "--time-scale", String(sim.time_scale), "--model", backend.model);
  if (sim.seed !== undefined) args.push("--seed", String(sim.seed));
  if (sim.max_model_len !== undefined) args.push("--max-model-len", String(sim.max_model_len));
  if (sim.script !== undefined) args.push("--script", sim.script);
  args.push("--tool-call-rate", String(sim.tool_call_rate));
  if (sim.tool_call_rate_after_result !== undefined)
    args.push("--tool-call-rate-after-result", String(sim.tool_call_rate_after_result));
  if (sim.parallel_tool_call_rate !== undefined)
    args.push("--parallel-tool-call-rate", String(sim.parallel_tool_call_rate));
  if (backend.kv_events !== undefined) args.push("--kv-events-config", simKvEventsConfig(backend.kv_events));
  return args;
}

/**
 * The simulator's `--kv-events-config` for a backend whose events the gateway subscribes to: the engine binds
 * what the gateway connects to. By vLLM's rule a `tcp://HOST:PORT` address would be connected to, so the engine
 * gets `tcp://*:PORT` (every interface, as vLLM's default `tcp://*:5557`); `ipc://` addresses bind as they are.
 */
export function simKvEventsConfig(events: NonNullable<BackendConfig["kv_events"]>): string {
  const bindable = (endpoint: string): string => endpoint.replace(/^tcp:\/\/.+:(\d+)$/, "tcp://*:$1");
  return JSON.stringify({
    enable_kv_cache_events: true,
    publisher: "zmq",
    endpoint: bindable(events.endpoint),
    ...(events.replay_endpoint === undefined ? {} : { replay_endpoint: bindable(events.replay_endpoint) }),
    topic: events.topic,
  });
}

export async function startEngineProcesses(backends: readonly BackendConfig[]): Promise<EngineProcess[]> {
  const started: EngineProcess[] = [];
  try {
    for (const backend of backends) {
      if (backend.simulate === undefined) continue;
      const child = spawn(process.execPath, [...process.execArgv, CLI_PATH, ...simArgs(backend)], {
        // The IPC channel carries readiness up and, by closing, the parent's end down (parent-link.ts). Its
        // own process group: a Ctrl-C at the terminal reaches only `start`, which drains the gateway before
        // it stops the engines the in-flight requests still need.
        stdio: ["ignore", "inherit", "inherit", "ipc"],
        detached: true,
      });
      started.push({ backendId: backend.id, child });
    }
    await Promise.all(started.map((engine) => waitUntilReady(engine)));
    return started;
  } catch (err) {
    await stopEngineProcesses(started);
    throw err;
  }
}

/**
 * Ready when the engine this process spawned says it listens: never by asking the port, which an engine left
 * over from another start (or any other program) could answer in its place.
 */
function waitUntilReady(engine: EngineProcess): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () =>
        fail(
          new EngineStartError(
            `simulated engine ${engine.backendId} was not ready within ${READY_TIMEOUT_MS} ms`,
          ),
        ),
      READY_TIMEOUT_MS,
    );
    const onMessage = (message: unknown): void => {
      if (!isReadyMessage(message)) return;
      cleanup();
      resolve();
    };
    const onExit = (code: number | null, signal: NodeJS.Signals | null): void =>
      fail(
        new EngineStartError(
          `simulated engine ${engine.backendId} exited (${signal ?? `code ${code}`}) before it was ready; its own line above says why`,
        ),
      );
    const cleanup = (): void => {
      clearTimeout(timer);
      engine.child.off("message", onMessage);
      engine.child.off("exit", onExit);
    };
    const fail = (err: Error): void => {
      cleanup();
      reject(err);
    };
    engine.child.on("message", onMessage);
    engine.child.once("exit", onExit);
  });
}

/** Resolves with the first engine that exits on its own (not stopped by stopEngineProcesses). */
export function firstEngineExit(
  engines: readonly EngineProcess[],
): Promise<{ backendId: string; signal: NodeJS.Signals | null; code: number | null }> {
  return new Promise((resolve) => {
    for (const { backendId, child } of engines) {
      child.once("exit", (code, signal) => {
        if (!stopping.has(child)) resolve({ backendId, signal, code });
      });
    }
  });
}

/** Engines being stopped by this process: their exits are expected. */
const stopping = new WeakSet<ChildProcess>();

export async function stopEngineProcesses(engines: readonly EngineProcess[]): Promise<void> {
  await Promise.all(
    engines.map(
      ({ child }) =>
        new Promise<void>((resolve) => {
          stopping.add(child);
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          const force = setTimeout(() => child.kill("SIGKILL"), 5000);
          child.once("exit", () => {
            clearTimeout(force);
            resolve();
          });
          child.kill("SIGTERM");
        }),
    ),
  );
}
