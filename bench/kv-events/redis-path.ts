// What sharing sends through Redis adds to a call's time to first byte: three gateway replicas (child processes)
// in front of two `instant` simulated engines that publish KV events, their bindings in memory (each its own) or in
// one redis-server, each call a new session. Measured in wall time: at the kvevents study's time scale of 10, a
// millisecond here is ten simulated ones.
//
// Run: npm run build && node --import tsx bench/kv-events/redis-path.ts [--bursts 40] [--burst-size 8] [--rounds 2]
// Each burst sends `--burst-size` calls at once over the three replicas, sub-agents sharing a ~9,000-token system
// prompt of their burst (the first computes it, the others find it pending or held: the head start's case); one
// call at a time is --burst-size 1. The first burst of each arm is a warm-up and is not counted.
import { parseArgs } from "node:util";
import { request } from "undici";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";
import { findRedisServer, startRedisServer } from "../../src/store/redis-server.js";
import { GatewayFleet } from "../../src/study/gateway-fleet.js";
import { percentile } from "../../src/study/stats.js";
import { gatewayConfig } from "../../src/study/studies/kvevents.js";
import { machine } from "../affinity/common.js";
import { loopbackKvEvents } from "../../test/kv-events/loopback-kv-events.js";

const { values: args } = parseArgs({
  options: {
    bursts: { type: "string", default: "40" },
    "burst-size": { type: "string", default: "8" },
    rounds: { type: "string", default: "2" },
  },
});
const BURSTS = Number(args.bursts);
const BURST_SIZE = Number(args["burst-size"]);
const ROUNDS = Number(args.rounds);
const REPLICAS = 3;
/** The model gatewayConfig (the kvevents study's) names for its engines. */
const MODEL = "Qwen/Qwen2.5-7B-Instruct";
const SYSTEM = "You are a careful coding sub-agent. ".repeat(1500);

async function firstByteMs(url: string, sessionId: string, burst: number, call: number): Promise<number> {
  const startMs = performance.now();
  const res = await request(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": sessionId },
    body: JSON.stringify({
      model: MODEL,
      stream: true,
      max_tokens: 4,
      messages: [
        { role: "system", content: `${SYSTEM}${burst}` },
        { role: "user", content: `task ${call}` },
      ],
    }),
  });
  let atMs = NaN;
  for await (const chunk of res.body as AsyncIterable<Buffer>) {
    if (Number.isNaN(atMs) && chunk.length > 0) atMs = performance.now() - startMs;
  }
  if (res.statusCode !== 200) throw new Error(`status ${res.statusCode}`);
  return atMs;
}

async function arm(
  store: "memory" | "redis",
  round: number,
  engines: readonly SimEngineHandle[],
  redisUrl: string,
): Promise<number[]> {
  const condition = {
    name: `redis-path-${store}-${round}`,
    pressure: "roomy",
    replicas: REPLICAS,
    placement: "events",
    store,
  } as const;
  const fleet = await GatewayFleet.start(gatewayConfig(condition, engines, 100_000, redisUrl), REPLICAS);
  try {
    const times: number[] = [];
    for (let burst = 0; burst <= BURSTS; burst++) {
      const calls = Array.from({ length: BURST_SIZE }, (_, call) =>
        firstByteMs(fleet.url(call % REPLICAS), `${condition.name}-${burst}-${call}`, burst, call),
      );
      const got = await Promise.all(calls);
      if (burst > 0) times.push(...got);
    }
    return times;
  } finally {
    await fleet.close();
  }
}

async function main(): Promise<void> {
  const redisPath = findRedisServer();
  if (redisPath === undefined) throw new Error("redis-server is not on PATH");
  const redis = await startRedisServer(redisPath);
  const events = loopbackKvEvents();
  const engines: SimEngineHandle[] = [];
  try {
    for (let i = 0; i < 2; i++)
      engines.push(await startSimEngine({ profile: "instant", model: MODEL, kvEvents: { config: events } }));
    console.log(machine());
    console.log(
      `${BURSTS} bursts of ${BURST_SIZE} new sessions over ${REPLICAS} replicas, first byte in wall ms:`,
    );
    for (let round = 0; round < ROUNDS; round++)
      for (const store of ["memory", "redis"] as const) {
        const times = await arm(store, round, engines, redis.url);
        const mean = times.reduce((a, b) => a + b, 0) / times.length;
        console.log(
          `${store.padEnd(6)} round ${round}: p50 ${percentile(times, 50).toFixed(2)}, p90 ${percentile(times, 90).toFixed(2)}, mean ${mean.toFixed(2)}`,
        );
      }
  } finally {
    await Promise.all(engines.map((e) => e.close()));
    await redis.stop();
  }
}

await main();
