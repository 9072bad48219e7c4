// A gateway as a child process (`agent-serve gateway --config FILE`) on an OS-assigned port: studies and tests.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";

/** Under tsx (tests, `node --import tsx`) this module is .ts: the child runs the cli from source the same way. */
const FROM_SOURCE = import.meta.url.endsWith(".ts");
const CLI_PATH = fileURLToPath(new URL(FROM_SOURCE ? "../cli.ts" : "../cli.js", import.meta.url));
const READY_TIMEOUT_MS = 30_000;
/** Kept for error messages; a busy gateway logs a line per request, which nothing else needs. */
const OUTPUT_KEPT_CHARS = 32 * 1024;
const STOP_TIMEOUT_MS = 10_000;
/** The line runGatewayUntilSignal logs once the server listens (its port is the OS-assigned one). */
const LISTENING = /gateway listening on [^\s"]*:(\d+)/;

export interface GatewayExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface GatewayProcess {
  /** `http://127.0.0.1:PORT` */
  readonly url: string;
  readonly port: number;
  /** The last few KiB it printed (stdout and stderr). */
  output(): string;
  readonly exited: Promise<GatewayExit>;
  /** SIGTERM (the gateway drains and exits 0), SIGKILL if it has not exited after a while. */
  stop(): Promise<GatewayExit>;
  /** SIGKILL now, without waiting: for a signal handler that must not leave the process behind. */
  killNow(): void;
}

export interface GatewayProcessOptions {
  /** The gateway's --log-level; at least info, since readiness is read from its "listening" line. */
  logLevel?: "info" | "debug" | "trace";
  /** Called with killNow as soon as the process is spawned, before it listens (for signal handlers). */
  onSpawn?: (killNow: () => void) => void;
}

/** Starts `agent-serve gateway --config configPath`; resolves once it listens (rejects if it exits first). */
export async function startGatewayProcess(
  configPath: string,
  options: GatewayProcessOptions = {},
): Promise<GatewayProcess> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  // These override the config file: one left in the environment would put every replica on one port.
  delete env["AGENT_SERVE_PORT"];
  delete env["AGENT_SERVE_ADMIN_TOKEN"];
  delete env["AGENT_SERVE_API_KEYS"];
  const args = [
    ...(FROM_SOURCE ? ["--import", "tsx"] : []),
    CLI_PATH,
    "gateway",
    "--config",
    configPath,
    "--log-level",
    options.logLevel ?? "info",
  ];
  const child: ChildProcess = spawn(process.execPath, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  const running = (): boolean => child.exitCode === null && child.signalCode === null;
  const killNow = (): void => {
    if (running()) child.kill("SIGKILL");
  };
  options.onSpawn?.(killNow);
  let text = "";
  const exited = new Promise<GatewayExit>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`gateway process not listening after ${READY_TIMEOUT_MS} ms:\n${text}`));
    }, READY_TIMEOUT_MS);
    const onData = (chunk: string): void => {
      text = (text + chunk).slice(-OUTPUT_KEPT_CHARS);
      const match = LISTENING.exec(text);
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    };
    child.stdout!.setEncoding("utf8").on("data", onData);
    child.stderr!.setEncoding("utf8").on("data", onData);
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`gateway process exited (${code ?? signal}) before it listened:\n${text}`));
    });
  });
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    output: () => text,
    exited,
    async stop() {
      if (!running()) return exited;
      child.kill("SIGTERM");
      const force = setTimeout(() => child.kill("SIGKILL"), STOP_TIMEOUT_MS);
      try {
        return await exited;
      } finally {
        clearTimeout(force);
      }
    },
    killNow,
  };
}
