// The binding scripts against a real Redis Cluster of three nodes: why affinity.store does not support it.
import { Cluster } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BINDING_SCRIPTS, RedisBindings } from "../../src/affinity/redis-bindings.js";
import { RedisLink } from "../../src/store/redis-link.js";
import { findRedisCli, startRedisCluster, type RedisCluster } from "../helpers/redis-cluster.js";
import { quietRedisLink, redisAvailable } from "../helpers/redis-server.js";

const redisTool = redisAvailable();
const cliPath = findRedisCli();
const skip = redisTool.skip || cliPath === undefined;

let cluster: RedisCluster | undefined;
let client: Cluster | undefined;
let link: RedisLink | undefined;

beforeAll(async () => {
  if (skip) return;
  cluster = await startRedisCluster(redisTool.path!, cliPath!);
  client = new Cluster([{ host: "127.0.0.1", port: cluster.ports[0]! }]);
  // The store's link to one node: only to build the script calls the store would send (never run on it).
  link = quietRedisLink(`redis://127.0.0.1:${cluster.ports[0]}`, BINDING_SCRIPTS, 1000, "bindings");
}, 60_000);

afterAll(async () => {
  await link?.close();
  client?.disconnect();
  await cluster?.stop();
});

describe.skipIf(skip)("the binding scripts on a Redis Cluster of three nodes", () => {
  it("runs a script that touches only its declared session key (the cluster itself works)", async () => {
    const call = new RedisBindings(link!, "agentserve:aff:", 10_000).lookupCall("s-absent", 1_000, true);
    expect(
      await client!.eval(call.script.source, call.script.keyCount, ...call.keys, ...call.args),
    ).toBeNull();
  });

  it("refuses the write, which also touches its backend's keys in other slots (so Cluster is not supported)", async () => {
    const remote = new RedisBindings(link!, "agentserve:aff:", 10_000);
    const call = remote.write("s-cluster", "engine-0", 20_000, 1_000);
    const [sessionSlot, backendSlot] = await Promise.all([
      client!.cluster("KEYSLOT", call.keys[0]!),
      client!.cluster("KEYSLOT", "agentserve:aff:e:engine-0"),
    ]);
    expect(sessionSlot).not.toBe(backendSlot);
    await expect(
      client!.eval(call.script.source, call.script.keyCount, ...call.keys, ...call.args),
    ).rejects.toThrow(/slot|non local key/i);
  });
});
