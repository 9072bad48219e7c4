// Benchmark: the most requests per second one `instant` engine serves, so it is never an overhead bottleneck.
//
// Starts `agent-serve sim --profile instant` as its own process (one core for it, one for this client) and drives
// it with closed-loop clients over an undici Pool on loopback: each of `c` workers sends the next request as soon
// as the previous answer has been read in full. Short prompt, max_tokens 16 with ignore_eos (exactly 16 tokens), streaming and not.
//
//   node --import tsx bench/sim/instant-throughput.ts [--seconds 5] [--concurrency 16,64] [--modes json,stream]
//     [--engine-node-args="--cpu-prof --cpu-prof-dir=/tmp/sim-prof"]   (profile the engine; see cpu-profile.ts)
//     [--cli /path/to/other/checkout/src/cli.ts]                       (benchmark another build, e.g. before/after)
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Pool } from "undici";
import { fixed, percentile } from "./stats.js";

const { values } = parseArgs({
  options: {
    seconds: { type: "string", default: "5" },
    "warmup-seconds": { type: "string", default: "1" },
    concurrency: { type: "string", default: "16,64" },
    modes: { type: "string", default: "json,stream" },
    "engine-node-args": { type: "string", default: "" },
    cli: { type: "string", default: fileURLToPath(new URL("../../src/cli.ts", import.meta.url)) },
  },
});
const seconds = Number(values.seconds);
const warmupSeconds = Number(values["warmup-seconds"]);
const levels = values.concurrency.split(",").map(Number);
const modes = values.modes.split(",");
const engineNodeArgs = values["engine-node-args"].split(" ").filter((arg) => arg.length > 0);
const CLI = values.cli;

/** CPU seconds (user + system) a process has used so far, from /proc; undefined off Linux. */
function cpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    // Fields 14 and 15 of /proc/PID/stat, after the parenthesised command name, are utime and stime in ticks.
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

async function startEngine(): Promise<{ url: string; pid: number | undefined; stop: () => Promise<void> }> {
  const child = spawn(
    process.execPath,
    [...engineNodeArgs, "--import", "tsx", CLI, "sim", "--port", "0", "--profile", "instant"],
    {
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  const url = await new Promise<string>((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match) resolve(match[1] as string);
    });
    child.once("exit", (code) => reject(new Error(`engine exited (${code}) before listening`)));
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    url,
    pid: child.pid,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

function readLoadAverage(): string {
  try {
    return readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
  } catch {
    return "n/a";
  }
}

interface RunResult {
  requests: number;
  errors: number;
  latenciesMs: number[];
}

async function closedLoop(
  url: string,
  concurrency: number,
  stream: boolean,
  durationMs: number,
): Promise<RunResult> {
  const pool = new Pool(url, { connections: concurrency, pipelining: 1 });
  const result: RunResult = { requests: 0, errors: 0, latenciesMs: [] };
  const deadline = performance.now() + durationMs;
  const worker = async (id: number): Promise<void> => {
    let i = 0;
    while (performance.now() < deadline) {
      const body = JSON.stringify({
        messages: [{ role: "user", content: `Hello from worker ${id}, request ${i++}. How are you today?` }],
        max_tokens: 16,
        ignore_eos: true,
        stream,
      });
      const started = performance.now();
      try {
        const res = await pool.request({
          path: "/v1/chat/completions",
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        });
        await res.body.text();
        if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
        result.requests += 1;
        result.latenciesMs.push(performance.now() - started);
      } catch {
        result.errors += 1;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, (_, id) => worker(id)));
  await pool.close();
  return result;
}

const engine = await startEngine();
try {
  console.log(`load average before: ${readLoadAverage()}`);
  console.log(
    `instant engine ${engine.url}; closed loop, ${seconds} s per run after ${warmupSeconds} s warm-up`,
  );
  console.log("mode | concurrency | req/s | p50 ms | p99 ms | errors | engine CPU | req/s per engine core");
  for (const stream of [false, true]) {
    if (!modes.includes(stream ? "stream" : "json")) continue;
    for (const concurrency of levels) {
      await closedLoop(engine.url, concurrency, stream, warmupSeconds * 1000);
      const cpuBefore = cpuSeconds(engine.pid);
      const run = await closedLoop(engine.url, concurrency, stream, seconds * 1000);
      const cpuAfter = cpuSeconds(engine.pid);
      const busy =
        cpuBefore === undefined || cpuAfter === undefined ? Number.NaN : (cpuAfter - cpuBefore) / seconds;
      const rate = run.requests / seconds;
      console.log(
        `${stream ? "stream" : "json"} | ${concurrency} | ${fixed(rate, 0)} | ` +
          `${fixed(percentile(run.latenciesMs, 50), 2)} | ${fixed(percentile(run.latenciesMs, 99), 2)} | ${run.errors} | ` +
          `${fixed(busy * 100, 0)}% | ${fixed(rate / busy, 0)}`,
      );
    }
  }
  console.log(`load average after: ${readLoadAverage()}`);
} finally {
  await engine.stop();
}
