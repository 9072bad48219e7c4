// Test fixture: several in-process gateway replicas (each its own Gateway) over shared simulated engines.
import { pino } from "pino";
import { parseConfig } from "../../src/config/load.js";
import type { GatewayConfig } from "../../src/config/schema.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";
import { metricValue, scrape } from "./cluster.js";

export const MODEL = "sim-small";

export interface ReplicaFleet {
  engines: Map<string, SimEngineHandle>;
  replicas: Gateway[];
  config: GatewayConfig;
  /** Stops replica i and starts a fresh one (new process state, same config) in its place. */
  restart(index: number): Promise<void>;
  /** A metric summed over the live replicas. */
  sum(name: string, labels?: Record<string, string>): Promise<number>;
  close(): Promise<void>;
}

export async function startReplicas(
  engineIds: readonly string[],
  replicaCount: number,
  overrides: Record<string, unknown>,
): Promise<ReplicaFleet> {
  const engines = new Map<string, SimEngineHandle>();
  const replicas: Gateway[] = [];
  try {
    for (const id of engineIds) engines.set(id, await startSimEngine({ profile: "instant", model: MODEL }));
    const config = parseConfig(
      {
        ...overrides,
        server: { host: "127.0.0.1", port: 0 },
        backends: engineIds.map((id) => ({
          id,
          tier: "small",
          base_url: engines.get(id)!.url,
          model: MODEL,
        })),
      },
      "replicas test",
    );
    const start = () =>
      Gateway.start(config, {
        logger: pino({ level: process.env["TEST_LOG_LEVEL"] ?? "silent" }),
        listen: { host: "127.0.0.1", port: 0 },
      });
    for (let i = 0; i < replicaCount; i++) replicas.push(await start());
    return {
      engines,
      replicas,
      config,
      async restart(index) {
        await replicas[index]!.close(0);
        replicas[index] = await start();
      },
      async sum(name, labels = {}) {
        let total = 0;
        for (const replica of replicas) total += metricValue(await scrape(replica.url), name, labels) ?? 0;
        return total;
      },
      async close() {
        for (const replica of replicas) await replica.close(0);
        await Promise.all([...engines.values()].map((e) => e.close()));
      },
    };
  } catch (err) {
    for (const replica of replicas) await replica.close(0);
    await Promise.all([...engines.values()].map((e) => e.close()));
    throw err;
  }
}
