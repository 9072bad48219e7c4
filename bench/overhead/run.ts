// Gateway overhead: the gateway in front of an `instant` simulated engine vs the engine called directly.
//
// Five processes: the engine, the gateway (built cli, log level info, its log lines to /dev/null), two
// reference proxies (floor-proxy.ts: no logic; duties-proxy.ts: the least a gateway with this contract does)
// and this client. Each scenario alternates rounds direct / gateway / floor / duties so that machine noise
// hits all alike, then reports latency percentiles of each and the difference from direct ("added").
//
// The scenarios measure the steady state of long-running processes. First, the first requests that
// fresh processes serve are measured on their own ("cold start"); then every path gets mixed traffic for
// --warmup-seconds (default 25), long enough for V8 to finish optimising the request path and for the
// gateway's periodic work (a health probe every 10 s, an engine-metrics read every 5 s) to have run twice:
// its first runs deoptimise shared code (undici, node streams) that must then be optimised again. With --pin (Linux
// taskset), this client has CPU 0 and the engine, the gateway and the proxies share CPU 1, so that a
// request crosses between the two CPUs twice whether it goes direct or through a proxy (on a VM a wake-up
// on the other CPU costs tens of microseconds); without it, the processes compete for the machine's cores.
//
// With --baseline DIR, a second gateway built from another checkout (DIR/dist/src/cli.js, e.g. a worktree of the
// commit before a change: `git worktree add /tmp/before HEAD~3 && (cd /tmp/before && npm ci && npm run build)`)
// runs beside this one in the same alternating rounds, so that a change's cost is measured before/after under
// the same machine noise. --baseline-extra YAML adds top-level config to the baseline gateway only (without
// --baseline, the baseline is this checkout's own build), e.g. the cost of route receipts:
// `--baseline-extra 'affinity: {receipts: {enabled: false}}'`. --gateway-extra YAML does the same for this side:
// with both, the two configs can swap sides, which cancels what the order of the rounds favours (an A/A run,
// the same config on both sides, differed by up to 9% in CPU per request).
//
// --turns N sends conversations of N turns (default 1), where per-message work (the receipts' fingerprint) shows.
//
//   npm run build && node --import tsx bench/overhead/run.ts [--quick] [--pin] [--warmup-seconds S]
//     [--baseline DIR] [--baseline-extra YAML] [--gateway-extra YAML] [--turns N]
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import * as hdr from "hdr-histogram-js";
import { Pool } from "undici";
import { freePort } from "../common.js";

const CLI = fileURLToPath(new URL("../../dist/src/cli.js", import.meta.url));
const quick = process.argv.includes("--quick");
const pin = process.argv.includes("--pin");
const warmupFlag = process.argv.indexOf("--warmup-seconds");
const warmupSeconds = warmupFlag > 0 ? Number(process.argv[warmupFlag + 1]) : quick ? 5 : 25;
/** Requests of the cold-start measurement, per path. */
const COLD_REQUESTS = 5000;
const baselineFlag = process.argv.indexOf("--baseline");
const baselineExtraFlag = process.argv.indexOf("--baseline-extra");
const BASELINE_EXTRA = baselineExtraFlag > 0 ? (process.argv[baselineExtraFlag + 1] ?? "") : "";
const gatewayExtraFlag = process.argv.indexOf("--gateway-extra");
const GATEWAY_EXTRA = gatewayExtraFlag > 0 ? (process.argv[gatewayExtraFlag + 1] ?? "") : "";
const BASELINE_CLI =
  baselineFlag > 0
    ? join(process.argv[baselineFlag + 1] ?? ".", "dist", "src", "cli.js")
    : baselineExtraFlag > 0
      ? CLI
      : undefined;
const MODEL = "bench-model";

function command(args: string[], cpu: number, cli = CLI): [string, string[]] {
  return pin
    ? ["taskset", ["-c", String(cpu), process.execPath, cli, ...args]]
    : [process.execPath, [cli, ...args]];
}

function spawnCli(
  args: string[],
  cpu: number,
  readyPattern: RegExp,
): Promise<{ child: ChildProcess; match: RegExpMatchArray }> {
  const [file, argv] = command(args, cpu);
  const child = spawn(file, argv, { stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let text = "";
    const onData = (chunk: Buffer): void => {
      text += chunk.toString();
      const match = text.match(readyPattern);
      if (match) {
        // From here on, output is drained and dropped (as a log shipper would take it).
        child.stdout!.off("data", onData);
        child.stdout!.resume();
        resolve({ child, match });
      }
    };
    child.stdout!.on("data", onData);
    child.once("exit", (code) => reject(new Error(`${args[0]} exited ${code}: ${text}`)));
  });
}

/** The gateway's log lines go to /dev/null, not through a pipe this client would have to drain. */
async function spawnGateway(config: string, url: string, cli = CLI): Promise<ChildProcess> {
  const [file, argv] = command(["gateway", "--config", config, "--log-level", "info"], 1, cli);
  const child = spawn(file, argv, { stdio: ["ignore", "ignore", "inherit"] });
  for (let i = 0; i < 200; i++) {
    const ok = await fetch(`${url}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return child;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error("gateway did not start");
}

function histogram(): hdr.Histogram {
  return hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 60_000_000,
    numberOfSignificantValueDigits: 3,
  });
}

const turnsFlag = process.argv.indexOf("--turns");
/** Earlier user/assistant turns in every request (--turns N: a conversation of N turns; default 1). */
const EARLIER_TURNS = turnsFlag > 0 ? Math.max(0, Number(process.argv[turnsFlag + 1]) - 1) : 0;
const HISTORY = Array.from({ length: EARLIER_TURNS }, (_, i) => [
  { role: "user", content: `Step ${i}: read the file and say what changes. `.repeat(8) },
  { role: "assistant", content: `Step ${i} done: the file has three functions to change. `.repeat(8) },
]).flat();

const body = (stream: boolean): string =>
  JSON.stringify({
    model: MODEL,
    messages: [
      { role: "system", content: "You are a helpful agent. ".repeat(20) },
      ...HISTORY,
      { role: "user", content: "Summarise the plan in one line." },
    ],
    max_tokens: 16,
    ignore_eos: true,
    stream,
  });

interface Sample {
  totalUs: number;
  firstByteUs: number;
}

async function one(pool: Pool, payload: string, session: string): Promise<Sample> {
  const started = performance.now();
  const response = await pool.request({
    path: "/v1/chat/completions",
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": session },
    body: payload,
  });
  let firstByteUs = 0;
  for await (const chunk of response.body) {
    if (firstByteUs === 0 && chunk.length > 0) firstByteUs = (performance.now() - started) * 1000;
  }
  if (response.statusCode !== 200) throw new Error(`status ${response.statusCode}`);
  return { totalUs: (performance.now() - started) * 1000, firstByteUs };
}

/** `count` requests at `concurrency`, closed loop; each worker is its own session. */
async function round(
  pool: Pool,
  payload: string,
  concurrency: number,
  count: number,
  into: { total: hdr.Histogram; first: hdr.Histogram },
  tag: string,
): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (next < count) {
        next++;
        const sample = await one(pool, payload, `${tag}-${worker}`);
        into.total.recordValue(Math.max(1, Math.round(sample.totalUs)));
        into.first.recordValue(Math.max(1, Math.round(sample.firstByteUs)));
      }
    }),
  );
  return count / ((performance.now() - started) / 1000);
}

type Paths = Partial<Record<"direct" | "gateway" | "baseline" | "floor" | "duties", string>>;

/** The first requests each fresh process serves, one at a time, alternating paths every 500. */
async function coldStart(paths: Paths, payload: string): Promise<Record<keyof Paths, hdr.Histogram>> {
  const names = Object.keys(paths) as (keyof Paths)[];
  const pools = names.map((name) => new Pool(paths[name]!, { connections: 1, pipelining: 1 }));
  const result = Object.fromEntries(names.map((name) => [name, histogram()])) as Record<
    keyof Paths,
    hdr.Histogram
  >;
  for (let done = 0; done < COLD_REQUESTS; done += 500) {
    for (const [i, name] of names.entries()) {
      await round(pools[i]!, payload, 1, 500, { total: result[name], first: histogram() }, `cold-${name}`);
    }
  }
  await Promise.all(pools.map((pool) => pool.close()));
  return result;
}

/** Mixed traffic on every path (json and stream, 1 and 16 at a time) until `durationMs` has passed. */
async function warmUp(paths: Paths, durationMs: number): Promise<void> {
  const until = performance.now() + durationMs;
  const sink = { total: histogram(), first: histogram() };
  const pools = Object.values(paths).map((url) => new Pool(url!, { connections: 16, pipelining: 1 }));
  while (performance.now() < until) {
    for (const pool of pools) {
      for (const stream of [false, true]) {
        await round(pool, body(stream), 16, 1000, sink, "warmup");
        await round(pool, body(stream), 1, 200, sink, "warmup");
      }
    }
  }
  await Promise.all(pools.map((pool) => pool.close()));
}

/** CPU time (user + system) a process has used, in µs, from /proc (Linux; undefined elsewhere). */
function cpuUs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    // Fields after the command name: utime and stime are the 12th and 13th, in clock ticks (100 Hz).
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return undefined;
  }
}

/** Runs `work` and adds the CPU the process used meanwhile to `into.us` (`into.requests` counts the work). */
async function metered<T>(
  pid: number | undefined,
  into: { us: number; requests: number },
  requests: number,
  work: () => Promise<T>,
): Promise<T> {
  const before = cpuUs(pid);
  const result = await work();
  const after = cpuUs(pid);
  if (before !== undefined && after !== undefined) {
    into.us += after - before;
    into.requests += requests;
  }
  return result;
}

function perRequest(meter: { us: number; requests: number }): string {
  return meter.requests === 0 ? "?" : String(Math.round(meter.us / meter.requests));
}

function ms(us: number): string {
  return (us / 1000).toFixed(3);
}

/** One of the reference proxies of this folder, in front of the engine, ready to answer. */
async function spawnReferenceProxy(
  script: string,
  engineUrl: string,
): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  const file = fileURLToPath(new URL(`./${script}`, import.meta.url));
  const argv = [process.execPath, "--import", "tsx", file, String(port), engineUrl];
  const [command0, args] = pin ? ["taskset", ["-c", "1", ...argv]] : [argv[0]!, argv.slice(1)];
  const child = spawn(command0, args, { stdio: ["ignore", "ignore", "inherit"] });
  const url = `http://127.0.0.1:${port}`;
  const answers = (): Promise<boolean> =>
    fetch(url).then(
      () => true,
      () => false,
    );
  for (let i = 0; i < 200; i++) {
    if (await answers()) return { child, url };
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  child.kill();
  throw new Error(`${script} did not answer on ${url} within 10 s`);
}

async function main(): Promise<void> {
  if (pin) spawnSync("taskset", ["-cp", "0", String(process.pid)], { stdio: "ignore" });
  const engine = await spawnCli(
    ["sim", "--port", "0", "--profile", "instant", "--model", MODEL],
    1,
    /listening on (http:\/\/\S+)/,
  );
  const engineUrl = engine.match[1]!;
  const dir = await mkdtemp(join(tmpdir(), "agent-serve-bench-"));
  const startGateway = async (
    name: string,
    cli: string,
    extra = "",
  ): Promise<{ child: ChildProcess; url: string }> => {
    const config = join(dir, `${name}.yaml`);
    const port = await freePort();
    await writeFile(
      config,
      `server: {host: 127.0.0.1, port: ${port}}\nbackends:\n  - {id: e0, tier: small, base_url: "${engineUrl}", model: ${MODEL}, max_inflight: 1024}\nadmission: {max_queue_size: 4096}\n${extra}\n`,
    );
    const url = `http://127.0.0.1:${port}`;
    return { child: await spawnGateway(config, url, cli), url };
  };
  const { child: gateway, url: gatewayUrl } = await startGateway("gateway", CLI, GATEWAY_EXTRA);
  const baseline =
    BASELINE_CLI === undefined ? undefined : await startGateway("baseline", BASELINE_CLI, BASELINE_EXTRA);
  const floor = await spawnReferenceProxy("floor-proxy.ts", engineUrl);
  const duties = await spawnReferenceProxy("duties-proxy.ts", engineUrl);
  const floorUrl = floor.url;
  const dutiesUrl = duties.url;

  const p = (h: hdr.Histogram, q: number): number => h.getValueAtPercentile(q);
  const paths: Paths = { direct: engineUrl, gateway: gatewayUrl, floor: floorUrl, duties: dutiesUrl };
  if (baseline !== undefined) paths.baseline = baseline.url;
  const cold = await coldStart(paths, body(false));
  process.stderr.write("done: cold start\n");
  await warmUp(paths, warmupSeconds * 1000);
  process.stderr.write("done: warm-up\n");

  const rows: string[] = [];
  const baselineRows: string[] = [];
  const scenarios: { concurrency: number; stream: boolean }[] = [];
  for (const concurrency of [1, 16, 64])
    for (const stream of [false, true]) scenarios.push({ concurrency, stream });
  const rounds = quick ? 3 : 10;
  for (const { concurrency, stream } of scenarios) {
    const perRound = concurrency === 1 ? (quick ? 300 : 1000) : quick ? 1000 : 4000;
    const direct = new Pool(engineUrl, { connections: concurrency, pipelining: 1 });
    const viaGateway = new Pool(gatewayUrl, { connections: concurrency, pipelining: 1 });
    const viaFloor = new Pool(floorUrl, { connections: concurrency, pipelining: 1 });
    const viaDuties = new Pool(dutiesUrl, { connections: concurrency, pipelining: 1 });
    const viaBaseline =
      baseline === undefined
        ? undefined
        : new Pool(baseline.url, { connections: concurrency, pipelining: 1 });
    const payload = body(stream);
    const d = { total: histogram(), first: histogram() };
    const g = { total: histogram(), first: histogram() };
    const f = { total: histogram(), first: histogram() };
    const u = { total: histogram(), first: histogram() };
    const b = { total: histogram(), first: histogram() };
    const warm = { total: histogram(), first: histogram() };
    // Opens this scenario's connections, so that no measured request waits for a connect.
    await round(direct, payload, concurrency, perRound, warm, "warm");
    await round(viaGateway, payload, concurrency, perRound, warm, "warm");
    await round(viaFloor, payload, concurrency, perRound, warm, "warm");
    await round(viaDuties, payload, concurrency, perRound, warm, "warm");
    if (viaBaseline !== undefined) await round(viaBaseline, payload, concurrency, perRound, warm, "warm");
    let directRate = 0;
    let gatewayRate = 0;
    const gatewayCpu = { us: 0, requests: 0 };
    const floorCpu = { us: 0, requests: 0 };
    const dutiesCpu = { us: 0, requests: 0 };
    const baselineCpu = { us: 0, requests: 0 };
    for (let r = 0; r < rounds; r++) {
      directRate += await round(direct, payload, concurrency, perRound, d, `d${r}`);
      gatewayRate += await metered(gateway.pid, gatewayCpu, perRound, () =>
        round(viaGateway, payload, concurrency, perRound, g, `g${r}`),
      );
      await metered(floor.child.pid, floorCpu, perRound, () =>
        round(viaFloor, payload, concurrency, perRound, f, `f${r}`),
      );
      await metered(duties.child.pid, dutiesCpu, perRound, () =>
        round(viaDuties, payload, concurrency, perRound, u, `u${r}`),
      );
      if (viaBaseline !== undefined) {
        await metered(baseline?.child.pid, baselineCpu, perRound, () =>
          round(viaBaseline, payload, concurrency, perRound, b, `b${r}`),
        );
      }
    }
    await direct.close();
    await viaGateway.close();
    await viaFloor.close();
    await viaDuties.close();
    await viaBaseline?.close();
    const dutiesAdded = `${ms(p(u.total, 50) - p(d.total, 50))} / ${ms(p(u.total, 99) - p(d.total, 99))}`;
    rows.push(
      `| ${concurrency} | ${stream ? "stream" : "json"} | ${ms(p(d.total, 50))} / ${ms(p(d.total, 99))} | ${ms(p(g.total, 50))} / ${ms(p(g.total, 99))} | **${ms(p(g.total, 50) - p(d.total, 50))} / ${ms(p(g.total, 99) - p(d.total, 99))}** | ${stream ? `${ms(p(g.first, 99) - p(d.first, 99))}` : "-"} | ${ms(p(f.total, 50) - p(d.total, 50))} / ${ms(p(f.total, 99) - p(d.total, 99))} | ${dutiesAdded} | ${Math.round(directRate / rounds)} / ${Math.round(gatewayRate / rounds)} | ${perRequest(gatewayCpu)} / ${perRequest(floorCpu)} / ${perRequest(dutiesCpu)} |`,
    );
    if (viaBaseline !== undefined) {
      baselineRows.push(
        `| ${concurrency} | ${stream ? "stream" : "json"} | ${ms(p(g.total, 50) - p(d.total, 50))} / ${ms(p(g.total, 99) - p(d.total, 99))} | ${ms(p(b.total, 50) - p(d.total, 50))} / ${ms(p(b.total, 99) - p(d.total, 99))} | ${perRequest(gatewayCpu)} / ${perRequest(baselineCpu)} |`,
      );
    }
    process.stderr.write(`done: c=${concurrency} ${stream ? "stream" : "json"}\n`);
  }

  // 256 concurrent streams of 256 tokens each: every stream completes, and the longest silence is reported.
  const streams = 256;
  const pool = new Pool(gatewayUrl, { connections: streams, pipelining: 1 });
  const longBody = JSON.stringify({
    model: MODEL,
    messages: [{ role: "user", content: "go" }],
    max_tokens: 256,
    ignore_eos: true,
    stream: true,
  });
  let worstGapMs = 0;
  let completed = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: streams }, async (_, i) => {
      const response = await pool.request({
        path: "/v1/chat/completions",
        method: "POST",
        headers: { "content-type": "application/json", "x-session-id": `many-${i}` },
        body: longBody,
      });
      let last = performance.now();
      let text = "";
      for await (const chunk of response.body) {
        const now = performance.now();
        worstGapMs = Math.max(worstGapMs, now - last);
        last = now;
        text += chunk.toString();
      }
      if (text.includes("data: [DONE]") && text.includes("x_agent_serve")) completed++;
    }),
  );
  const wallMs = performance.now() - started;
  await pool.close();

  console.log(
    `machine: ${cpus().length} x ${cpus()[0]?.model ?? "?"}, node ${process.version}, ${process.platform}/${process.arch}`,
  );
  console.log(
    `command: node --import tsx bench/overhead/run.ts${quick ? " --quick" : ""}${pin ? " --pin" : ""} --warmup-seconds ${warmupSeconds}${baselineFlag > 0 ? ` --baseline ${process.argv[baselineFlag + 1]}` : ""}${baselineExtraFlag > 0 ? ` --baseline-extra '${BASELINE_EXTRA}'` : ""}${gatewayExtraFlag > 0 ? ` --gateway-extra '${GATEWAY_EXTRA}'` : ""}${turnsFlag > 0 ? ` --turns ${EARLIER_TURNS + 1}` : ""}  (${rounds} alternating rounds per scenario)`,
  );
  console.log("");
  console.log(
    `cold start, the first ${COLD_REQUESTS} c=1 json requests of fresh processes, p50 / p99 ms: direct ${ms(p(cold.direct, 50))} / ${ms(p(cold.direct, 99))}, gateway ${ms(p(cold.gateway, 50))} / ${ms(p(cold.gateway, 99))}, floor proxy ${ms(p(cold.floor, 50))} / ${ms(p(cold.floor, 99))}, duties proxy ${ms(p(cold.duties, 50))} / ${ms(p(cold.duties, 99))}`,
  );
  console.log("");
  console.log(
    "| concurrency | mode | direct p50 / p99 ms | gateway p50 / p99 ms | added p50 / p99 ms | added TTFT p99 ms | floor proxy added p50 / p99 ms | duties proxy added p50 / p99 ms | req/s direct / gateway | CPU µs/request gateway / floor / duties |",
  );
  console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const row of rows) console.log(row);
  if (baseline !== undefined) {
    console.log("");
    console.log(
      `this gateway${GATEWAY_EXTRA ? ` (plus ${GATEWAY_EXTRA})` : ""} vs the baseline (${BASELINE_CLI}${BASELINE_EXTRA ? `, plus ${BASELINE_EXTRA}` : ""}), same rounds:`,
    );
    console.log("");
    console.log(
      "| concurrency | mode | gateway added p50 / p99 ms | baseline added p50 / p99 ms | CPU µs/request gateway / baseline |",
    );
    console.log("| --- | --- | --- | --- | --- |");
    for (const row of baselineRows) console.log(row);
    console.log(
      `cold start p50 / p99 ms: gateway ${ms(p(cold.gateway, 50))} / ${ms(p(cold.gateway, 99))}, baseline ${ms(p(cold.baseline, 50))} / ${ms(p(cold.baseline, 99))}`,
    );
  }
  console.log("");
  console.log(
    `${streams} concurrent streams x 256 tokens: ${completed}/${streams} completed with metadata and [DONE] in ${Math.round(wallMs)} ms; longest gap between chunks ${worstGapMs.toFixed(1)} ms`,
  );

  gateway.kill("SIGTERM");
  floor.child.kill("SIGTERM");
  duties.child.kill("SIGTERM");
  baseline?.child.kill("SIGTERM");
  engine.child.kill("SIGTERM");
  await rm(dir, { recursive: true, force: true });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
