// Test fixture: a real Redis Cluster of three redis-server nodes on OS-assigned ports, made by redis-cli.
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Redis } from "ioredis";
import { findExecutable } from "../../src/core/executables.js";
import { freePort, startRedisServer, type RedisServer } from "../../src/store/redis-server.js";
import { pollUntil } from "./cluster.js";

const run = promisify(execFile);

export interface RedisCluster {
  /** The nodes' client ports. */
  readonly ports: readonly number[];
  stop(): Promise<void>;
}

/** redis-cli (Debian's redis-tools, installed with redis-server), from the PATH. */
export function findRedisCli(): string | undefined {
  return findExecutable("redis-cli");
}

/**
 * Starts `nodes` cluster-enabled servers (each with its own bus port, also OS-assigned, and its config file
 * in a temporary folder), joins them with `redis-cli --cluster create` (every slot assigned, no replicas)
 * and resolves once every node says cluster_state:ok. Always stop() it: the servers are child processes.
 */
export async function startRedisCluster(
  serverPath: string,
  cliPath: string,
  nodes = 3,
): Promise<RedisCluster> {
  const dir = await mkdtemp(join(tmpdir(), "agent-serve-redis-cluster-"));
  const servers: RedisServer[] = [];
  const stop = async (): Promise<void> => {
    for (const server of servers) await server.stop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < nodes; i++) {
      const busPort = await freePort();
      servers.push(
        await startRedisServer(serverPath, {
          args: (port) => [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            join(dir, `nodes-${port}.conf`),
            "--cluster-port",
            String(busPort),
          ],
        }),
      );
    }
    const addresses = servers.map((server) => `127.0.0.1:${server.port}`);
    await run(cliPath, ["--cluster", "create", ...addresses, "--cluster-replicas", "0", "--cluster-yes"]);
    for (const server of servers) {
      const client = new Redis(server.port, "127.0.0.1");
      try {
        await pollUntil(async () => /cluster_state:ok/.test(String(await client.cluster("INFO"))), 100_000);
      } finally {
        client.disconnect();
      }
    }
  } catch (err) {
    await stop();
    throw err;
  }
  return { ports: servers.map((server) => server.port), stop };
}
