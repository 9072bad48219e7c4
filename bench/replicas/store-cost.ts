// What the redis binding store costs against the memory store: added latency and CPU per request at c=1 and
// c=64 (one gateway in front of an `instant` simulated engine, in this process), and the memory a million
// bindings take in Redis (INFO memory). Needs Debian's redis-server on PATH; starts its own on a free port.
//
// With --budgets each request also carries an agent id (one of 10) and `admission.store` is the same kind as
// the binding store (a budget no request reaches), so the budget's reserve and settle are measured too.
//
//   node --import tsx bench/replicas/store-cost.ts [--quick] [--budgets]
import { pino } from "pino";
import { Redis } from "ioredis";
import * as hdr from "hdr-histogram-js";
import { Pool } from "undici";
import { parseConfig } from "../../src/config/load.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { startSimEngine } from "../../src/sim/index.js";
import { REDIS_SERVER_MISSING, findRedisServer, startRedisServer } from "../../src/store/redis-server.js";

const quick = process.argv.includes("--quick");
const budgets = process.argv.includes("--budgets");
const REQUESTS_PER_ROUND = quick ? 2000 : 6000;
const ROUNDS = quick ? 2 : 4;
const SESSIONS = 1000;
const MODEL = "bench-model";

const body = JSON.stringify({ model: MODEL, max_tokens: 1, messages: [{ role: "user", content: "hi" }] });

async function round(
  url: string,
  concurrency: number,
  histogram: hdr.Histogram,
): Promise<{ seconds: number; cpuUs: number }> {
  const pool = new Pool(url, { connections: concurrency, pipelining: 1 });
  let next = 0;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < REQUESTS_PER_ROUND) {
        const i = next++;
        const t0 = performance.now();
        const response = await pool.request({
          path: "/v1/chat/completions",
          method: "POST",
          headers: {
            "content-type": "application/json",
            "x-session-id": `bench-${i % SESSIONS}`,
            ...(budgets ? { "x-agent-id": `agent-${i % 10}` } : {}),
          },
          body,
        });
        await response.body.dump();
        if (response.statusCode !== 200) throw new Error(`status ${response.statusCode}`);
        histogram.recordValue(Math.round((performance.now() - t0) * 1000));
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  await pool.close();
  return { seconds, cpuUs: cpu.user + cpu.system };
}

async function redisCpuSeconds(client: Redis): Promise<number> {
  const info = await client.info("cpu");
  const user = Number(/used_cpu_user:([\d.]+)/.exec(info)![1]);
  const sys = Number(/used_cpu_sys:([\d.]+)/.exec(info)![1]);
  return user + sys;
}

async function main(): Promise<void> {
  const redisPath = findRedisServer();
  if (redisPath === undefined) throw new Error(REDIS_SERVER_MISSING);
  const redis = await startRedisServer(redisPath);
  const admin = new Redis({ port: redis.port, host: "127.0.0.1" });
  const engine = await startSimEngine({ profile: "instant", model: MODEL });
  const logger = pino({ level: "silent" });
  const gatewayFor = (store: "memory" | "redis") =>
    Gateway.start(
      parseConfig(
        {
          server: { host: "127.0.0.1", port: 0 },
          backends: [{ id: "e0", tier: "small", base_url: engine.url, model: MODEL, max_inflight: 256 }],
          health: { engine_metrics_interval_seconds: 0 },
          affinity: {
            store:
              store === "memory"
                ? { kind: "memory" }
                : { kind: "redis", url: `redis://127.0.0.1:${redis.port}/0` },
          },
          ...(budgets
            ? {
                admission: {
                  default_token_budget: 1_000_000_000_000,
                  store:
                    store === "memory"
                      ? { kind: "memory" }
                      : { kind: "redis", url: `redis://127.0.0.1:${redis.port}/0` },
                },
              }
            : {}),
        },
        "bench",
      ),
      { logger, listen: { host: "127.0.0.1", port: 0 } },
    );
  const gateways = { memory: await gatewayFor("memory"), redis: await gatewayFor("redis") };
  await gateways.redis.runtime.bindings.flush();
  for (const concurrency of [1, 64]) {
    const results: Record<
      string,
      { histogram: hdr.Histogram; seconds: number; cpuUs: number; redisCpu: number }
    > = {};
    for (const name of ["memory", "redis"] as const) {
      results[name] = {
        histogram: hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 10_000_000 }),
        seconds: 0,
        cpuUs: 0,
        redisCpu: 0,
      };
    }
    // Warm-up, then alternating rounds so machine noise hits both alike.
    for (const name of ["memory", "redis"] as const)
      await round(gateways[name].url, concurrency, hdr.build());
    for (let r = 0; r < ROUNDS; r++) {
      for (const name of ["memory", "redis"] as const) {
        const cpu0 = await redisCpuSeconds(admin);
        const { seconds, cpuUs } = await round(gateways[name].url, concurrency, results[name]!.histogram);
        results[name]!.seconds += seconds;
        results[name]!.cpuUs += cpuUs;
        results[name]!.redisCpu += (await redisCpuSeconds(admin)) - cpu0;
      }
    }
    const n = REQUESTS_PER_ROUND * ROUNDS;
    for (const name of ["memory", "redis"] as const) {
      const { histogram, seconds, cpuUs, redisCpu } = results[name]!;
      console.log(
        `c=${concurrency} ${name.padEnd(6)} p50 ${(histogram.getValueAtPercentile(50) / 1000).toFixed(3)} ms  ` +
          `p99 ${(histogram.getValueAtPercentile(99) / 1000).toFixed(3)} ms  ${(n / seconds).toFixed(0)} req/s  ` +
          `CPU ${(cpuUs / n).toFixed(0)} us/req (this process) + ${((redisCpu * 1e6) / n).toFixed(1)} us/req (redis-server)`,
      );
    }
  }
  await gateways.memory.close(0);
  await gateways.redis.close(0);
  await engine.close();

  // A million bindings, written by the store's own script (36-character session ids, 16 backends).
  await admin.flushall();
  const before = Number(/used_memory:(\d+)/.exec(await admin.info("memory"))![1]);
  const { BINDING_SCRIPTS } = await import("../../src/affinity/redis-bindings.js");
  const write = BINDING_SCRIPTS[1]!;
  await admin.script("LOAD", write.source);
  const total = quick ? 100_000 : 1_000_000;
  const nowMs = Date.now();
  for (let start = 0; start < total; start += 10_000) {
    const pipeline = admin.pipeline();
    for (let i = start; i < start + 10_000; i++) {
      const session = `${i.toString(16).padStart(8, "0")}-0000-4000-8000-000000000000`;
      pipeline.evalsha(
        write.sha,
        1,
        `agentserve:aff:b:${session}`,
        nowMs,
        `engine-${i % 16}`,
        nowMs + 1_800_000,
        3_600_000,
        "agentserve:aff:",
        session,
      );
    }
    await pipeline.exec();
  }
  const after = Number(/used_memory:(\d+)/.exec(await admin.info("memory"))![1]);
  console.log(
    `${total} bindings: used_memory +${((after - before) / 1e6).toFixed(1)} MB (${((after - before) / total).toFixed(0)} bytes per binding)`,
  );
  admin.disconnect();
  await redis.stop();
}

await main();
