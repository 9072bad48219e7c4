// Test fixture: a real Prometheus (Debian's package, installed by .ci/run) as a child process on an
// OS-assigned loopback port with a temporary storage dir, plus a small client for its HTTP API.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findExecutable } from "../../src/core/executables.js";
import { eventsOf, waitUntil } from "../helpers/wait.js";

export { findExecutable };

/**
 * Whether tests that need `name` run: in CI (CI=true) a missing binary is a failure, locally the tests are
 * skipped with a message saying how to install it.
 */
export function requiredTool(name: string): { path: string | undefined; skip: boolean; missing: string } {
  const path = findExecutable(name);
  const missing =
    `${name} is not installed: .ci/run installs it ` +
    "(apt-get install -y --no-install-recommends prometheus, Debian's package, with promtool)";
  const skip = path === undefined && process.env["CI"] !== "true";
  if (skip) console.warn(`skipping the tests that need ${name}: ${missing}`);
  return { path, skip, missing };
}

/** Runs promtool synchronously; returns its exit status and combined output. */
export function promtool(path: string, args: string[]): { status: number | null; output: string } {
  const result = spawnSync(path, args, { encoding: "utf8", timeout: 30_000 });
  return { status: result.status, output: `${result.stdout ?? ""}${result.stderr ?? ""}` };
}

/**
 * Re-checks `condition` until it holds or time runs out. Each check is a real round trip (it waits on I/O),
 * the next one starts when it is answered: no sleep between them, the deadline is only an overall bound.
 */
export async function waitFor(
  what: string,
  condition: () => Promise<boolean>,
  { timeoutMs = 30_000 }: { timeoutMs?: number } = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      if (await condition()) return;
    } catch (err) {
      lastError = err;
    }
    await new Promise((resolve) => setImmediate(resolve)); // lets I/O in between checks; not a sleep
  }
  const detail = lastError instanceof Error ? ` (last error: ${lastError.message})` : "";
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${detail}`);
}

export interface Sample {
  metric: Record<string, string>;
  value: number;
}

interface ApiEnvelope {
  status: "success" | "error";
  data?: unknown;
  errorType?: string;
  error?: string;
}

export class PromQLError extends Error {
  override name = "PromQLError";
}

export interface PrometheusHandle {
  readonly url: string;
  /** Wall-clock ms when the process was started: every sample it holds is later than this. */
  readonly startedAtMs: number;
  /** An instant query (GET /api/v1/query); a parse or evaluation error throws PromQLError. */
  query(expr: string, timeSeconds?: number): Promise<Sample[]>;
  /** The value of a query that must return exactly one sample, or undefined when it returns none. */
  scalar(expr: string): Promise<number | undefined>;
  /** GET /api/v1/targets: every active target's scrape pool, labels, health and last scrape. */
  targets(): Promise<{ scrapePool: string; labels: Record<string, string>; health: string }[]>;
  /** GET /api/v1/label/NAME/values, optionally restricted to the series of a selector. */
  labelValues(label: string, match?: string): Promise<string[]>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

async function api(url: string): Promise<unknown> {
  const response = await fetch(url, { signal: AbortSignal.timeout(10_000) });
  const body = (await response.json()) as ApiEnvelope;
  if (body.status !== "success") {
    throw new PromQLError(`${body.errorType ?? "error"}: ${body.error ?? `HTTP ${response.status}`}`);
  }
  return body.data;
}

async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  let timer: NodeJS.Timeout | undefined;
  const killed = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      child.kill("SIGKILL");
      resolve();
    }, 10_000);
  });
  await Promise.race([exited, killed]);
  clearTimeout(timer);
  await exited;
}

/**
 * Starts `prometheus` with the given config text on a free loopback port and a fresh storage dir, and
 * resolves once /-/ready answers 200. A port taken between choosing and binding it is retried.
 */
export async function startPrometheus(binary: string, configText: string): Promise<PrometheusHandle> {
  const dir = await mkdtemp(join(tmpdir(), "agent-serve-prometheus-"));
  const configFile = join(dir, "prometheus.yml");
  await writeFile(configFile, configText);
  try {
    for (let attempt = 1; ; attempt++) {
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const startedAtMs = Date.now();
      const child = spawn(
        binary,
        [
          `--config.file=${configFile}`,
          `--storage.tsdb.path=${join(dir, `data-${attempt}`)}`,
          `--web.listen-address=127.0.0.1:${port}`,
          // Info level for its "ready" line: the start waits on that line, not on polling /-/ready.
          "--log.level=info",
        ],
        { stdio: ["ignore", "ignore", "pipe"] },
      );
      let stderr = "";
      let ready = false;
      child.stderr?.setEncoding("utf8");
      child.stderr?.on("data", (chunk: string) => {
        stderr = (stderr + chunk).slice(-8000);
        if (/Server is ready to receive web requests/.test(stderr)) ready = true;
      });
      let spawnFailed: Error | undefined;
      child.once("error", (err) => {
        spawnFailed = err;
      });
      let failure: string | undefined;
      try {
        await waitUntil(
          "prometheus ready",
          () => {
            if (spawnFailed !== undefined) failure = `prometheus did not start: ${spawnFailed.message}`;
            else if (child.exitCode !== null) failure = `prometheus exited with ${child.exitCode}: ${stderr}`;
            return failure !== undefined || ready;
          },
          [eventsOf(child.stderr!, "data"), eventsOf(child, "exit"), eventsOf(child, "error")],
          30_000,
        );
        if (failure === undefined) {
          const response = await fetch(`${url}/-/ready`, { signal: AbortSignal.timeout(2000) });
          await response.arrayBuffer();
          if (response.status !== 200) throw new Error(`/-/ready answered ${response.status}`);
        }
      } catch (err) {
        await stopProcess(child);
        throw new Error(`${err instanceof Error ? err.message : String(err)}; stderr: ${stderr}`);
      }
      if (failure !== undefined) {
        await stopProcess(child);
        if (failure.includes("address already in use") && attempt < 3) continue;
        throw new Error(failure);
      }
      return prometheusClient(url, startedAtMs, async () => {
        await stopProcess(child);
        await rm(dir, { recursive: true, force: true });
      });
    }
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

function prometheusClient(url: string, startedAtMs: number, stop: () => Promise<void>): PrometheusHandle {
  const query = async (expr: string, timeSeconds?: number): Promise<Sample[]> => {
    const params = new URLSearchParams({ query: expr });
    if (timeSeconds !== undefined) params.set("time", timeSeconds.toFixed(3));
    const data = (await api(`${url}/api/v1/query?${params}`)) as { resultType: string; result: unknown };
    if (data.resultType === "scalar") {
      const [, value] = data.result as [number, string];
      return [{ metric: {}, value: Number(value) }];
    }
    if (data.resultType !== "vector") throw new PromQLError(`unexpected result type ${data.resultType}`);
    return (data.result as { metric: Record<string, string>; value: [number, string] }[]).map((r) => ({
      metric: r.metric,
      value: Number(r.value[1]),
    }));
  };
  return {
    url,
    startedAtMs,
    query,
    async scalar(expr) {
      const samples = await query(expr);
      if (samples.length > 1) throw new PromQLError(`${expr} returned ${samples.length} samples`);
      return samples[0]?.value;
    },
    async targets() {
      const data = (await api(`${url}/api/v1/targets?state=active`)) as {
        activeTargets: { scrapePool: string; labels: Record<string, string>; health: string }[];
      };
      return data.activeTargets;
    },
    async labelValues(label, match) {
      const params = new URLSearchParams();
      if (match !== undefined) params.set("match[]", match);
      return (await api(`${url}/api/v1/label/${encodeURIComponent(label)}/values?${params}`)) as string[];
    },
    stop,
  };
}
