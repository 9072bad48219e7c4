// Flood: N requests, each with a session id and an agent id never seen before, through a gateway in front of
// the instant engine. Reports the gateway's heap as the sticky table and the budget table fill to their caps,
// and checks the gateway still serves (and still keeps affinity) at the end.
//
//   npm run build && node --import tsx bench/flood/run.ts [--requests 1000000] [--concurrency 64]
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { cpus, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { Pool } from "undici";
import { metricValue } from "../../src/metrics/prometheus-text.js";
import { freePort, waitHealthy } from "../common.js";

const CLI = fileURLToPath(new URL("../../dist/src/cli.js", import.meta.url));
const { values } = parseArgs({
  options: {
    requests: { type: "string", default: "1000000" },
    concurrency: { type: "string", default: "64" },
    /** Caps the gateway's V8 old space: finishing the flood proves the live heap stayed under it. */
    "gateway-heap-mb": { type: "string" },
  },
});
const TOTAL = Number(values.requests);
const CONCURRENCY = Number(values.concurrency);

async function main(): Promise<void> {
  const enginePort = await freePort();
  const engine = spawn(
    process.execPath,
    [CLI, "sim", "--port", String(enginePort), "--profile", "instant", "--model", "m"],
    { stdio: "ignore" },
  );
  await waitHealthy(`http://127.0.0.1:${enginePort}/health`);
  const port = await freePort();
  const dir = await mkdtemp(join(tmpdir(), "agent-serve-flood-"));
  const config = join(dir, "gateway.yaml");
  await writeFile(
    config,
    `server: {host: 127.0.0.1, port: ${port}}\nbackends:\n  - {id: e0, tier: small, base_url: "http://127.0.0.1:${enginePort}", model: m, max_inflight: 1024}\nadmission: {max_queue_size: 4096}\n`,
  );
  const heapCap =
    values["gateway-heap-mb"] === undefined ? [] : [`--max-old-space-size=${values["gateway-heap-mb"]}`];
  const gateway = spawn(
    process.execPath,
    [...heapCap, CLI, "gateway", "--config", config, "--log-level", "warn"],
    { stdio: "ignore" },
  );
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(`${url}/healthz`);
  const pool = new Pool(url, { connections: CONCURRENCY });
  const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 1 });
  const samples: string[] = [];
  const sample = async (label: string): Promise<number> => {
    const text = await (await fetch(`${url}/metrics`)).text();
    const heapMB = metricValue(text, "nodejs_heap_size_used_bytes") / 2 ** 20;
    const bindings = metricValue(text, "agentserve_sticky_bindings");
    samples.push(
      `| ${label} | ${bindings} | ${heapMB.toFixed(0)} | ${(metricValue(text, "process_resident_memory_bytes") / 2 ** 20).toFixed(0)} |`,
    );
    return heapMB;
  };
  await sample("start");
  let next = 0;
  let failed = 0;
  const started = performance.now();
  let lastSample = 0;
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < TOTAL) {
        const i = next++;
        try {
          const response = await pool.request({
            path: "/v1/chat/completions",
            method: "POST",
            headers: {
              "content-type": "application/json",
              "x-session-id": `flood-${i}-${crypto.randomUUID()}`,
              "x-agent-id": `agent-${i}`,
            },
            body,
          });
          await response.body.dump();
          if (response.statusCode !== 200) failed++;
        } catch {
          failed++;
        }
        if (i - lastSample >= TOTAL / 10) {
          lastSample = i;
          await sample(`${i.toLocaleString("en")} requests`);
        }
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  await sample(`${TOTAL.toLocaleString("en")} requests`);
  const check = await pool.request({
    path: "/v1/chat/completions",
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": "after-the-flood" },
    body,
  });
  await check.body.dump();
  await pool.close();
  console.log(`machine: ${cpus().length} x ${cpus()[0]?.model ?? "?"}, node ${process.version}`);
  console.log(
    `command: node --import tsx bench/flood/run.ts --requests ${TOTAL} --concurrency ${CONCURRENCY}` +
      (heapCap.length > 0 ? ` --gateway-heap-mb ${values["gateway-heap-mb"]}` : ""),
  );
  console.log(
    `${TOTAL} requests with new session and agent ids in ${seconds.toFixed(0)} s (${(TOTAL / seconds).toFixed(0)} req/s), ${failed} failed; a request after the flood: ${check.statusCode}`,
  );
  console.log("");
  console.log("| after | live bindings | heap used (MB) | RSS (MB) |");
  console.log("| --- | --- | --- | --- |");
  for (const row of samples) console.log(row);
  gateway.kill("SIGTERM");
  engine.kill("SIGTERM");
  await rm(dir, { recursive: true, force: true });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
