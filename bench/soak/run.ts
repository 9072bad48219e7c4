// Soak: mixed agent traffic for a long while, engines dying, hanging and failing, a flood of random ids.
// Checks that every request ends in a success or a clear error (nothing lost, no unexplained 5xx) and
// that the gateway's heap stays flat after warm-up.
//
//   npm run build && node --import tsx bench/soak/run.ts [--seconds 600] [--concurrency 24]
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Pool } from "undici";
import { SeededRandom } from "../../src/core/random.js";
import { metricValue } from "../../src/metrics/prometheus-text.js";
import { freePort, waitHealthy } from "../common.js";

const CLI = fileURLToPath(new URL("../../dist/src/cli.js", import.meta.url));
const { values } = parseArgs({
  options: { seconds: { type: "string", default: "600" }, concurrency: { type: "string", default: "24" } },
});
const DURATION_MS = Number(values.seconds) * 1000;
const CONCURRENCY = Number(values.concurrency);
const MODEL = "soak-model";

function startEngine(port: number): ChildProcess {
  return spawn(
    process.execPath,
    [CLI, "sim", "--port", String(port), "--profile", "qwen2.5-7b", "--time-scale", "20", "--model", MODEL],
    {
      stdio: "ignore",
    },
  );
}

interface Tally {
  sent: number;
  ok: number;
  clearErrors: Map<number, number>;
  streamErrors: number;
  lost: number;
  unexplained5xx: number;
}

async function main(): Promise<void> {
  const random = new SeededRandom(7);
  const enginePorts = [await freePort(), await freePort(), await freePort()];
  const engines = enginePorts.map(startEngine);
  await Promise.all(enginePorts.map((p) => waitHealthy(`http://127.0.0.1:${p}/health`)));
  const gatewayPort = await freePort();
  const dir = await mkdtemp(join(tmpdir(), "agent-serve-soak-"));
  const config = join(dir, "gateway.yaml");
  await writeFile(
    config,
    [
      `server: {host: 127.0.0.1, port: ${gatewayPort}, max_body_bytes: 262144}`,
      "backends:",
      ...enginePorts.map(
        (p, i) =>
          `  - {id: small-${i}, tier: small, base_url: "http://127.0.0.1:${p}", model: ${MODEL}, max_inflight: 32}`,
      ),
      "affinity: {max_bindings: 50000}",
      "admission: {max_agents: 5000, default_token_budget: 50000000, max_queue_size: 512, queue_timeout_seconds: 10}",
      "health: {probe_interval_seconds: 1, failures_to_mark_down: 3, successes_to_mark_up: 2, probe_timeout_seconds: 1, engine_metrics_interval_seconds: 2}",
      "upstream: {first_byte_timeout_seconds: 3, request_timeout_seconds: 30}",
    ].join("\n") + "\n",
  );
  const gateway = spawn(process.execPath, [CLI, "gateway", "--config", config, "--log-level", "warn"], {
    stdio: "ignore",
  });
  const url = `http://127.0.0.1:${gatewayPort}`;
  await waitHealthy(`${url}/healthz`);
  const pool = new Pool(url, { connections: CONCURRENCY * 2 });

  const tally: Tally = {
    sent: 0,
    ok: 0,
    clearErrors: new Map(),
    streamErrors: 0,
    lost: 0,
    unexplained5xx: 0,
  };
  const started = performance.now();
  const elapsed = (): number => performance.now() - started;
  const heap: { atS: number; heapMB: number; rssMB: number }[] = [];
  const system = "You are a soak-test agent with tools. ".repeat(60);

  async function one(
    session: string,
    agent: string,
    turn: number,
    stream: boolean,
    malformed: boolean,
  ): Promise<void> {
    tally.sent++;
    const body = malformed
      ? '{"messages": [ {"role": "user", "content": "cut'
      : JSON.stringify({
          model: MODEL,
          stream,
          max_tokens: 16,
          ignore_eos: true,
          messages: [
            { role: "system", content: system },
            { role: "user", content: `turn ${turn} of ${session}` },
          ],
        });
    try {
      const response = await pool.request({
        path: "/v1/chat/completions",
        method: "POST",
        headers: { "content-type": "application/json", "x-session-id": session, "x-agent-id": agent },
        body,
      });
      const text = await response.body.text();
      if (response.statusCode === 200) {
        if (stream && !text.includes("data: [DONE]")) tally.lost++;
        else if (stream && text.includes('data: {"error"')) tally.streamErrors++;
        else tally.ok++;
        return;
      }
      const envelope = JSON.parse(text) as { error?: { code?: string } };
      if (envelope.error?.code === undefined) tally.lost++;
      else tally.clearErrors.set(response.statusCode, (tally.clearErrors.get(response.statusCode) ?? 0) + 1);
      if (response.statusCode === 500) tally.unexplained5xx++;
    } catch {
      tally.lost++;
    }
  }

  // Faults: every 20 s one engine is killed (restarted 8 s later), hung, or failing half its requests.
  const faults: string[] = [];
  const faultLoop = (async () => {
    let round = 0;
    while (elapsed() < DURATION_MS - 15_000) {
      await new Promise((resolve) => setTimeout(resolve, 20_000));
      const index = round % 3;
      const port = enginePorts[index]!;
      const kind = ["kill", "hang", "error_rate"][Math.floor(round / 3) % 3]!;
      faults.push(`${Math.round(elapsed() / 1000)} s: ${kind} small-${index}`);
      if (kind === "kill") {
        engines[index]!.kill("SIGKILL");
        await new Promise((resolve) => setTimeout(resolve, 8000));
        engines[index] = startEngine(port);
      } else {
        const fault = kind === "hang" ? { kind: "hang" } : { kind: "error_rate", rate: 0.5, status: 500 };
        await fetch(`http://127.0.0.1:${port}/sim/fault`, {
          method: "POST",
          body: JSON.stringify(fault),
        }).catch(() => undefined);
        await new Promise((resolve) => setTimeout(resolve, 8000));
        await fetch(`http://127.0.0.1:${port}/sim/fault`, {
          method: "POST",
          body: JSON.stringify({ kind: "none" }),
        }).catch(() => undefined);
      }
      round++;
    }
  })();

  const heapLoop = setInterval(() => {
    void fetch(`${url}/metrics`)
      .then((r) => r.text())
      .then((text) =>
        heap.push({
          atS: Math.round(elapsed() / 1000),
          heapMB: metricValue(text, "nodejs_heap_size_used_bytes") / 2 ** 20,
          rssMB: metricValue(text, "process_resident_memory_bytes") / 2 ** 20,
        }),
      );
  }, 10_000);

  let sessionCounter = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (elapsed() < DURATION_MS) {
        const roll = random.next();
        if (roll < 0.3) {
          // A flood of one-shot random ids: sessions and agents never seen again.
          await one(
            `flood-${random.int(2 ** 31)}`,
            `agent-${random.int(2 ** 31)}`,
            1,
            random.next() < 0.5,
            false,
          );
        } else if (roll < 0.33) {
          await one(`bad-${sessionCounter++}`, "agent-bad", 1, false, true);
        } else {
          const session = `session-${sessionCounter++}`;
          const agent = `agent-${random.int(50)}`;
          for (let turn = 1; turn <= 6 && elapsed() < DURATION_MS; turn++)
            await one(session, agent, turn, random.next() < 0.5, false);
        }
      }
    }),
  );
  clearInterval(heapLoop);
  await faultLoop;
  await pool.close();
  gateway.kill("SIGTERM");
  for (const engine of engines) engine.kill("SIGTERM");

  const errors = [...tally.clearErrors]
    .sort((a, b) => a[0] - b[0])
    .map(([s, n]) => `${s}: ${n}`)
    .join(", ");
  const warm = heap.filter((h) => h.atS >= 60);
  const first = warm[0];
  const last = warm.at(-1);
  console.log(`machine: ${cpus().length} x ${cpus()[0]?.model ?? "?"}, node ${process.version}`);
  console.log(
    `command: node --import tsx bench/soak/run.ts --seconds ${values.seconds} --concurrency ${CONCURRENCY}`,
  );
  console.log("");
  console.log(
    "| requests sent | succeeded | clear errors (status: count) | streams ended by an SSE error event | lost | unexplained 5xx |",
  );
  console.log("| --- | --- | --- | --- | --- | --- |");
  console.log(
    `| ${tally.sent} | ${tally.ok} | ${errors || "none"} | ${tally.streamErrors} | ${tally.lost} | ${tally.unexplained5xx} |`,
  );
  console.log("");
  console.log(`faults injected: ${faults.join("; ")}`);
  console.log(
    `gateway heap used after warm-up (60 s): ${first?.heapMB.toFixed(1)} MB at ${first?.atS} s -> ${last?.heapMB.toFixed(1)} MB at ${last?.atS} s; ` +
      `max ${Math.max(...warm.map((h) => h.heapMB)).toFixed(1)} MB; RSS ${first?.rssMB.toFixed(0)} -> ${last?.rssMB.toFixed(0)} MB`,
  );
  console.log(`heap samples (s: MB): ${heap.map((h) => `${h.atS}: ${h.heapMB.toFixed(0)}`).join(", ")}`);
  process.exit(tally.lost === 0 && tally.unexplained5xx === 0 ? 0 : 1);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
