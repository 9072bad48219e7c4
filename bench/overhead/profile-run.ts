// One gateway profiled under load: where its CPU per request goes (bench/README.md, "Ninth round").
//
// The engine and the gateway (built cli, the overhead bench's config, log level info to /dev/null) share CPU 1,
// this client has CPU 0 (taskset, Linux). After WARMUP c=16 json requests it sends C1 c=1 json and C16 c=16 json
// requests, reads the gateway's CPU from /proc over those, then stops it, so that `--cpu-prof` writes its profile
// into DIR, and prints the profile's parts (profile-parts.ts) per request of all the requests it served.
//
// With --cli PATH, the gateway of another build (e.g. /tmp/before/dist/src/cli.js: a profile before a change).
// With --stream, every request (warm-up included) streams its answer. With --floor, the floor proxy
// (floor-proxy.ts) takes the gateway's place: the same parts for the least any Node.js proxy does. With --strace,
// the c=1 requests' system calls are counted (`strace -c -f`, attached for that phase only) into DIR/syscalls.txt.
//
//   npm run build && node --import tsx bench/overhead/profile-run.ts DIR [WARMUP C1 C16] [--no-prof] [--stream]
//     [--cli PATH] [--floor] [--node-flags "FLAGS"] [--strace]
import { spawn, spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { mkdir, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Pool } from "undici";
import { freePort, waitHealthy } from "../common.js";

const CLI = fileURLToPath(new URL("../../dist/src/cli.js", import.meta.url));
const PARTS = fileURLToPath(new URL("./profile-parts.ts", import.meta.url));
const cliFlag = process.argv.indexOf("--cli");
const nodeFlagsAt = process.argv.indexOf("--node-flags");
/** Extra flags of the gateway's node (e.g. "--max-semi-space-size=32"), space-separated. */
const nodeFlags = nodeFlagsAt > 0 ? process.argv[nodeFlagsAt + 1]!.split(" ").filter(Boolean) : [];
const GATEWAY_CLI = cliFlag > 0 ? process.argv[cliFlag + 1]! : CLI;
const args = process.argv
  .slice(2)
  .filter((a, i, all) => !a.startsWith("--") && all[i - 1] !== "--cli" && all[i - 1] !== "--node-flags");
const profile = !process.argv.includes("--no-prof");
const stream = process.argv.includes("--stream");
const floor = process.argv.includes("--floor");
const traced = process.argv.includes("--strace");
const FLOOR = fileURLToPath(new URL("./floor-proxy.ts", import.meta.url));
const dir = args[0] ?? "prof";
const [warmup, c1, c16] = [Number(args[1] ?? 10_000), Number(args[2] ?? 20_000), Number(args[3] ?? 30_000)];
const MODEL = "bench-model";
const payload = JSON.stringify({
  model: MODEL,
  messages: [
    { role: "system", content: "You are a helpful agent. ".repeat(20) },
    { role: "user", content: "Summarise the plan in one line." },
  ],
  max_tokens: 16,
  ignore_eos: true,
  stream,
});

function cpuUs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

async function load(url: string, concurrency: number, count: number): Promise<void> {
  const pool = new Pool(url, { connections: concurrency, pipelining: 1 });
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (next < count) {
        next++;
        const response = await pool.request({
          path: "/v1/chat/completions",
          method: "POST",
          headers: { "content-type": "application/json", "x-session-id": `p-${concurrency}-${worker}` },
          body: payload,
        });
        await response.body.text();
        if (response.statusCode !== 200) throw new Error(`status ${response.statusCode}`);
      }
    }),
  );
  await pool.close();
}

/** The floor proxy has no health route (it forwards every request as a POST): wait until it accepts. */
async function listening(port: number): Promise<void> {
  for (let i = 0; i < 400; i++) {
    const accepted = await new Promise<boolean>((resolve) => {
      const socket = connect(port, "127.0.0.1", () => resolve(true));
      socket.once("error", () => resolve(false));
      socket.once("connect", () => socket.destroy());
    });
    if (accepted) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`nothing listens on ${port}`);
}

/**
 * Attaches `strace -c -f` to process `pid` (taskset execs node: the same pid); resolves once
 * attached, to a function that detaches it and waits for its counts to be written.
 */
async function countSyscalls(pid: number, out: string): Promise<() => Promise<void>> {
  const tracer = spawn("strace", ["-c", "-f", "-p", String(pid), "-o", out], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  // strace says "Process N attached" on stderr once it is.
  await new Promise<void>((resolve, reject) => {
    tracer.stderr.on("data", (chunk: Buffer) => {
      if (chunk.toString().includes("attached")) resolve();
    });
    tracer.once("error", reject);
    tracer.once("exit", (code) => reject(new Error(`strace exited with ${code}`)));
  });
  return async () => {
    const exited = new Promise((resolve) => tracer.once("exit", resolve));
    tracer.kill("SIGINT");
    await exited;
  };
}

async function main(): Promise<void> {
  spawnSync("taskset", ["-cp", "0", String(process.pid)], { stdio: "ignore" });
  await mkdir(dir, { recursive: true });
  const enginePort = await freePort();
  const engine = spawn(
    "taskset",
    [
      "-c",
      "1",
      process.execPath,
      CLI,
      "sim",
      "--port",
      String(enginePort),
      "--profile",
      "instant",
      "--model",
      MODEL,
    ],
    { stdio: "ignore" },
  );
  const engineUrl = `http://127.0.0.1:${enginePort}`;
  await waitHealthy(`${engineUrl}/health`);
  const port = await freePort();
  const config = join(dir, "gw.yaml");
  await writeFile(
    config,
    `server: {host: 127.0.0.1, port: ${port}}\nbackends:\n  - {id: e0, tier: small, base_url: "${engineUrl}", model: ${MODEL}, max_inflight: 1024}\nadmission: {max_queue_size: 4096}\n`,
  );
  const flags = [...nodeFlags, ...(profile ? ["--cpu-prof", `--cpu-prof-dir=${dir}`] : [])];
  const command = floor
    ? [process.execPath, ...flags, "--import", "tsx", FLOOR, String(port), engineUrl]
    : [process.execPath, ...flags, GATEWAY_CLI, "gateway", "--config", config, "--log-level", "info"];
  const gateway = spawn("taskset", ["-c", "1", ...command], { stdio: ["ignore", "ignore", "inherit"] });
  const url = `http://127.0.0.1:${port}`;
  if (floor) await listening(port);
  else await waitHealthy(`${url}/healthz`);
  await load(url, 16, warmup);
  const tracer = traced ? await countSyscalls(gateway.pid!, join(dir, "syscalls.txt")) : undefined;
  const before = cpuUs(gateway.pid!);
  const started = performance.now();
  await load(url, 1, c1);
  await tracer?.();
  const c1Cpu = cpuUs(gateway.pid!);
  const c1Ms = performance.now() - started;
  await load(url, 16, c16);
  const after = cpuUs(gateway.pid!);
  console.log(
    `gateway CPU µs/request: c=1 ${Math.round((c1Cpu - before) / c1)} (${Math.round(c1 / (c1Ms / 1000))} req/s), c=16 ${Math.round((after - c1Cpu) / c16)}`,
  );
  const exited = new Promise((resolve) => gateway.once("exit", resolve));
  gateway.kill("SIGTERM");
  await exited;
  engine.kill("SIGTERM");
  if (!profile) return;
  const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
  if (file === undefined) throw new Error(`no profile in ${dir}`);
  spawnSync(process.execPath, ["--import", "tsx", PARTS, join(dir, file), String(warmup + c1 + c16)], {
    stdio: "inherit",
  });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
