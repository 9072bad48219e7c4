// A real redis-server (Debian's package) as a child process on a free loopback port: for tests and the replicas study.
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { findExecutable } from "../core/executables.js";

/** How to get redis-server, for the message of whoever needs it and does not find it. */
export const REDIS_SERVER_MISSING =
  "redis-server is not on PATH: install Debian's package (apt-get install -y --no-install-recommends " +
  "redis-server; .ci/run does) or Redis 7 / Valkey from elsewhere";

/** The redis-server on PATH, or undefined. */
export function findRedisServer(): string | undefined {
  return findExecutable("redis-server");
}

/** A port the OS just handed out (redis has no `--port 0`): bound, read and closed again. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

export interface RedisServer {
  readonly port: number;
  /** `redis://127.0.0.1:PORT/0` */
  readonly url: string;
  /** Kills the process at once (SIGKILL): the dead-store case. */
  kill(): Promise<void>;
  /** Starts it again on the same port (empty: nothing is persisted). */
  restart(): Promise<void>;
  /** Stops it (SIGTERM, then SIGKILL); safe to call twice. */
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 20_000;

/** Spawns redis-server on `port`; resolves when it accepts connections, rejects on a clash or early exit. */
function spawnOn(
  path: string,
  port: number,
  onSpawn: (child: ChildProcess) => void,
  extraArgs: (port: number) => readonly string[],
  onOutput: ((text: string) => void) | undefined,
): Promise<ChildProcess> {
  const child = spawn(
    path,
    [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--loglevel",
      "notice",
      ...extraArgs(port),
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  onSpawn(child);
  return new Promise((resolve, reject) => {
    let output = "";
    const timer = setTimeout(
      () => fail(new Error(`redis-server not ready after ${READY_TIMEOUT_MS} ms`)),
      READY_TIMEOUT_MS,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString("utf8");
      if (output.includes("Ready to accept connections")) done();
    };
    const onExit = () => fail(new Error(`redis-server exited before it was ready:\n${output}`));
    const cleanup = () => {
      clearTimeout(timer);
      child.stdout!.off("data", onData);
      child.off("exit", onExit);
      child.off("error", fail);
      // Keep draining its output so the pipe never fills and blocks it.
      child.stdout!.resume();
      child.stderr!.resume();
    };
    function done() {
      cleanup();
      if (onOutput !== undefined) {
        // Handed on from here, for whoever waits on what it logs.
        onOutput(output);
        const forward = (chunk: Buffer): void => onOutput(chunk.toString("utf8"));
        child.stdout!.on("data", forward);
        child.stderr!.on("data", forward);
      }
      resolve(child);
    }
    function fail(err: Error) {
      cleanup();
      child.kill("SIGKILL");
      reject(err);
    }
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.once("exit", onExit);
    child.once("error", fail);
  });
}

async function stopChild(child: ChildProcess | undefined, signal: NodeJS.Signals): Promise<void> {
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill(signal);
  const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}

export interface RedisServerOptions {
  /**
   * Called with a synchronous SIGKILL of each process as soon as it is spawned, before it is ready: a signal
   * handler (src/study/interrupt-guard.ts) can then stop one that is still starting.
   */
  onSpawn?: (killNow: () => void) => void;
  /** More command-line options for the port it is given (a cluster node's config file and bus port). */
  args?: (port: number) => readonly string[];
  /** Everything the server logs (notice level), in order: what it started with, then each chunk as it comes. */
  onOutput?: (text: string) => void;
}

/** Starts redis-server on a free port, retrying with another port if the one picked was taken meanwhile. */
export async function startRedisServer(path: string, options: RedisServerOptions = {}): Promise<RedisServer> {
  const onSpawn = (spawned: ChildProcess): void =>
    options.onSpawn?.(() => {
      if (spawned.exitCode === null && spawned.signalCode === null) spawned.kill("SIGKILL");
    });
  const extraArgs = options.args ?? (() => []);
  let child: ChildProcess | undefined;
  let port = 0;
  let lastError: unknown;
  for (let attempt = 0; attempt < 5 && child === undefined; attempt++) {
    port = await freePort();
    try {
      child = await spawnOn(path, port, onSpawn, extraArgs, options.onOutput);
    } catch (err) {
      lastError = err;
    }
  }
  if (child === undefined) throw lastError instanceof Error ? lastError : new Error("redis-server failed");
  return {
    port,
    url: `redis://127.0.0.1:${port}/0`,
    kill: async () => {
      await stopChild(child, "SIGKILL");
    },
    restart: async () => {
      await stopChild(child, "SIGKILL");
      child = await spawnOn(path, port, onSpawn, extraArgs, options.onOutput);
    },
    stop: async () => {
      await stopChild(child, "SIGTERM");
    },
  };
}
