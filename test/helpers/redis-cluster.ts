// Test fixture: a real Redis Cluster of three redis-server nodes on OS-assigned ports, made by redis-cli.
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { findExecutable } from "../../src/core/executables.js";
import { freePort, startRedisServer, type RedisServer } from "../../src/store/redis-server.js";
import { ChangeSignal } from "../../src/core/change-signal.js";
import { waitUntil } from "./wait.js";

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
    // Each node logs "Cluster state changed: ok" once it has every slot covered: the event waited on.
    const logs: string[] = [];
    const logged = new ChangeSignal();
    for (let i = 0; i < nodes; i++) {
      const busPort = await freePort();
      logs.push("");
      servers.push(
        await startRedisServer(serverPath, {
          onOutput: (text) => {
            logs[i] += text;
            logged.notify();
          },
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
    await waitUntil(
      "every node's cluster state ok",
      () => logs.every((log) => log.includes("Cluster state changed: ok")),
      logged.subscribe,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  return { ports: servers.map((server) => server.port), stop };
}
