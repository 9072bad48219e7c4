// Starts the simulated engines a config asks for as child processes, waits until they answer, stops them.
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { request } from "undici";
import type { BackendConfig } from "../config/schema.js";

/** Under tsx this module is .ts, compiled it is .js: spawn the cli file of the same kind. */
const CLI_PATH = fileURLToPath(
  new URL(import.meta.url.endsWith(".ts") ? "../cli.ts" : "../cli.js", import.meta.url),
);
const READY_TIMEOUT_MS = 20_000;
const READY_POLL_MS = 50;

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
  return args;
}

export async function startEngineProcesses(backends: readonly BackendConfig[]): Promise<EngineProcess[]> {
  const started: EngineProcess[] = [];
  try {
    for (const backend of backends) {
      if (backend.simulate === undefined) continue;
      const child = spawn(process.execPath, [...process.execArgv, CLI_PATH, ...simArgs(backend)], {
        stdio: ["ignore", "inherit", "inherit"],
      });
      started.push({ backendId: backend.id, child });
    }
    await Promise.all(
      started.map((engine) =>
        waitUntilHealthy(engine, backends.find((b) => b.id === engine.backendId)!.base_url),
      ),
    );
    return started;
  } catch (err) {
    await stopEngineProcesses(started);
    throw err;
  }
}

async function waitUntilHealthy(engine: EngineProcess, baseUrl: string): Promise<void> {
  const deadline = performance.now() + READY_TIMEOUT_MS;
  const exited = new Promise<never>((_resolve, reject) => {
    engine.child.once("exit", (code) =>
      reject(new Error(`simulated engine ${engine.backendId} exited with code ${code} before it was ready`)),
    );
  });
  exited.catch(() => undefined);
  while (performance.now() < deadline) {
    const ok = await Promise.race([
      request(`${baseUrl.replace(/\/+$/, "")}/health`).then(
        async (res) => {
          await res.body.dump();
          return res.statusCode === 200;
        },
        () => false,
      ),
      exited,
    ]);
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, READY_POLL_MS));
  }
  throw new Error(
    `simulated engine ${engine.backendId} did not answer ${baseUrl}/health within ${READY_TIMEOUT_MS} ms`,
  );
}

export async function stopEngineProcesses(engines: readonly EngineProcess[]): Promise<void> {
  await Promise.all(
    engines.map(
      ({ child }) =>
        new Promise<void>((resolve) => {
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
