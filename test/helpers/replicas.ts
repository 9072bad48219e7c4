// Test fixture: three gateway replicas over shared simulated engines, as child processes or in-process Gateways.
import { pino } from "pino";
import { parseConfig } from "../../src/config/load.js";
import type { GatewayConfig } from "../../src/config/schema.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";
import { GatewayFleet } from "../../src/study/gateway-fleet.js";
import { metricValue, scrape } from "./cluster.js";
import { healthChanges, waitUntil } from "./wait.js";

export const MODEL = "sim-small";

/** What the replica scenarios need, whichever way the replicas run. */
export interface Replicas {
  engines: Map<string, SimEngineHandle>;
  readonly size: number;
  url(index: number): string;
  /** Stops replica i and starts a fresh one (new process state, same config) in its place. */
  restart(index: number): Promise<void>;
  /** A metric summed over the live replicas. */
  sum(name: string, labels?: Record<string, string>): Promise<number>;
  /** Resolves once every replica's health checks see the engine up (or down). */
  allSee(engine: string, state: "up" | "down"): Promise<void>;
  close(): Promise<void>;
}

/** In-process replicas, for tests that reach into a replica's runtime (flush its write-backs). */
export interface ReplicaFleet extends Replicas {
  replicas: Gateway[];
  config: GatewayConfig;
}

async function startEngines(engineIds: readonly string[]): Promise<Map<string, SimEngineHandle>> {
  const engines = new Map<string, SimEngineHandle>();
  try {
    for (const id of engineIds) engines.set(id, await startSimEngine({ profile: "instant", model: MODEL }));
    return engines;
  } catch (err) {
    await closeEngines(engines);
    throw err;
  }
}

function closeEngines(engines: Map<string, SimEngineHandle>): Promise<unknown> {
  return Promise.all([...engines.values()].map((e) => e.close()));
}

function rawConfig(
  engines: Map<string, SimEngineHandle>,
  overrides: Record<string, unknown>,
): Record<string, unknown> {
  return {
    ...overrides,
    server: { host: "127.0.0.1", port: 0 },
    backends: [...engines.entries()].map(([id, engine]) => ({
      id,
      tier: "small",
      base_url: engine.url,
      model: MODEL,
    })),
  };
}

/** Real `agent-serve gateway` child processes on one config file (as a Deployment runs them). */
export async function startReplicaProcesses(
  engineIds: readonly string[],
  replicaCount: number,
  overrides: Record<string, unknown>,
): Promise<Replicas> {
  const engines = await startEngines(engineIds);
  let fleet: GatewayFleet;
  try {
    fleet = await GatewayFleet.start(rawConfig(engines, overrides), replicaCount);
  } catch (err) {
    await closeEngines(engines);
    throw err;
  }
  return {
    engines,
    size: fleet.size,
    url: (index) => fleet.url(index),
    restart: (index) => fleet.restart(index),
    sum: (name, labels) => fleet.sum(name, labels),
    allSee: (engine, state) => fleet.waitForBackend(engine, state),
    async close() {
      await fleet.close();
      await closeEngines(engines);
    },
  };
}

export async function startReplicas(
  engineIds: readonly string[],
  replicaCount: number,
  overrides: Record<string, unknown>,
): Promise<ReplicaFleet> {
  const engines = await startEngines(engineIds);
  const replicas: Gateway[] = [];
  try {
    const config = parseConfig(rawConfig(engines, overrides), "replicas test");
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
      size: replicaCount,
      url: (index) => replicas[index]!.url,
      async restart(index) {
        await replicas[index]!.close(0);
        replicas[index] = await start();
      },
      async sum(name, labels = {}) {
        let total = 0;
        for (const replica of replicas) total += metricValue(await scrape(replica.url), name, labels) ?? 0;
        return total;
      },
      async allSee(engine, state) {
        await waitUntil(
          `every replica to see ${engine} ${state}`,
          () =>
            replicas.every((r) => {
              const seen = r.runtime.registry.get(engine)!.state;
              return state === "down" ? seen === "down" : seen !== "down";
            }),
          replicas.map((r) => healthChanges(r.runtime.registry)),
        );
      },
      async close() {
        for (const replica of replicas) await replica.close(0);
        await closeEngines(engines);
      },
    };
  } catch (err) {
    for (const replica of replicas) await replica.close(0);
    await closeEngines(engines);
    throw err;
  }
}
