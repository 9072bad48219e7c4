// Test fixture: real `agent-serve` child processes (sim, gateway, start) on OS-assigned loopback ports.
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { fileURLToPath } from "node:url";
import { pino } from "pino";
import { parseConfig } from "../../src/config/load.js";
import { Gateway } from "../../src/gateway/gateway.js";

export const CLI = fileURLToPath(new URL("../../src/cli.ts", import.meta.url));

export interface CliProcess {
  child: ChildProcess;
  /** Everything the process printed so far (stdout and stderr). */
  output(): string;
  /** Resolves with the first output line that matches (rejects if the process exits first). */
  waitForLine(pattern: RegExp): Promise<RegExpMatchArray>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Runs the cli from source (through tsx) with the given arguments. */
export function runCli(args: string[], env: Record<string, string> = {}): CliProcess {
  const child = spawn(process.execPath, ["--import", "tsx", CLI, ...args], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let text = "";
  const waiters: { pattern: RegExp; resolve: (m: RegExpMatchArray) => void; reject: (e: Error) => void }[] =
    [];
  const check = (): void => {
    for (const waiter of [...waiters]) {
      const match = text.match(waiter.pattern);
      if (match) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(match);
      }
    }
  };
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => ((text += chunk), check()));
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => ((text += chunk), check()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => {
      for (const waiter of waiters.splice(0))
        waiter.reject(new Error(`process exited (${code ?? signal}):\n${text}`));
      resolve({ code, signal });
    }),
  );
  return {
    child,
    output: () => text,
    waitForLine: (pattern) =>
      new Promise((resolve, reject) => {
        const match = text.match(pattern);
        if (match) return resolve(match);
        if (child.exitCode !== null || child.signalCode !== null)
          return reject(new Error(`process exited:\n${text}`));
        waiters.push({ pattern, resolve, reject });
      }),
    exited,
  };
}

/** A simulated engine in its own process; resolves once it listens, with its URL. */
export async function spawnSim(args: string[] = []): Promise<CliProcess & { url: string }> {
  const proc = runCli(["sim", "--port", "0", ...args]);
  const match = await proc.waitForLine(/listening on (http:\/\/\S+)/);
  return { ...proc, url: match[1]! };
}

/** Ports the OS hands out now (for configs that must name a port before the process starts). */
export async function freePorts(count: number): Promise<number[]> {
  const servers = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<ReturnType<typeof createServer>>((resolve) => {
          const server = createServer();
          server.listen(0, "127.0.0.1", () => resolve(server));
        }),
    ),
  );
  const ports = servers.map((s) => (s.address() as { port: number }).port);
  await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  return ports;
}

export async function stopProcess(proc: CliProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill(signal);
  await proc.exited;
}

/** A gateway (in process) in front of simulated engine processes: backends `small-0`, `small-1`, ... of tier small. */
export async function gatewayOverSims(
  engines: { url: string }[],
  model: string,
  health: Record<string, unknown>,
): Promise<Gateway> {
  const config = parseConfig(
    {
      server: { host: "127.0.0.1", port: 0 },
      health,
      backends: engines.map((e, i) => ({ id: `small-${i}`, tier: "small", base_url: e.url, model })),
    },
    "test",
  );
  return Gateway.start(config, { logger: pino({ level: "silent" }), listen: { host: "127.0.0.1", port: 0 } });
}
