// Engines from DNS (SRV records from a loopback DNS server): engines join and leave under traffic, no request fails.
import { EventEmitter } from "node:events";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";
import { chat, metaOf, SMALL_MODEL } from "../helpers/cluster.js";
import { startLoopbackDns, type LoopbackDns } from "../helpers/dns-server.js";
import { eventsOf, healthChanges, waitUntil } from "../helpers/wait.js";

const NAME = "_http._tcp.engines.agent-serve.test";

let gateway: Gateway | undefined;
let dns: LoopbackDns | undefined;
const engines: SimEngineHandle[] = [];

afterEach(async () => {
  await gateway?.close(0);
  gateway = undefined;
  await dns?.close();
  dns = undefined;
  await Promise.all(engines.splice(0).map((e) => e.close()));
});

describe("discovery over DNS", () => {
  it("adds engines that appear (after a probe says they answer) and drops those that vanish, failing nothing", async () => {
    for (let i = 0; i < 3; i++)
      engines.push(await startSimEngine({ profile: "instant", model: SMALL_MODEL }));
    dns = await startLoopbackDns();
    const srv = (indices: number[]) => indices.map((i) => ({ target: "127.0.0.1", port: engines[i]!.port }));
    dns.setSrv(NAME, srv([0, 1]));
    const config = parseConfig(
      {
        server: { host: "127.0.0.1", port: 0 },
        discovery: [
          {
            name: NAME,
            tier: "small",
            type: "SRV",
            model: SMALL_MODEL,
            refresh_seconds: 0.05,
            servers: [dns.server],
          },
        ],
        health: { probe_interval_seconds: 0.05, probe_timeout_seconds: 0.5 },
      },
      "discovery test",
    );
    gateway = await Gateway.start(config, {
      logger: pino({ level: process.env["TEST_LOG_LEVEL"] ?? "silent" }),
      listen: { host: "127.0.0.1", port: 0 },
    });
    const g = gateway;
    const idOf = (i: number) => `small.127.0.0.1.${engines[i]!.port}`;
    const stateOf = (i: number) => g.runtime.registry.get(idOf(i))?.state;
    await waitUntil(
      "the first two engines up",
      () => stateOf(0) === "up" && stateOf(1) === "up",
      healthChanges(g.runtime.registry),
    );

    // Traffic runs all along: new sessions, so every engine of the tier gets its share.
    const servedBy = new Map<string, number>();
    const statuses: number[] = [];
    let stop = false;
    let n = 0;
    // Each answer wakes the waits below: discovery and probes change what the next answer sees.
    const answered = new EventEmitter();
    const traffic = (async () => {
      while (!stop) {
        const response = await chat(g.url, { session: `dns-${n++}`, maxTokens: 2 });
        statuses.push(response.status);
        if (response.status === 200) {
          const backend = metaOf(response.json).backend_id;
          servedBy.set(backend, (servedBy.get(backend) ?? 0) + 1);
        }
        answered.emit("answer");
      }
    })();
    const until = (what: string, condition: () => boolean): Promise<void> =>
      waitUntil(what, condition, [eventsOf(answered, "answer"), healthChanges(g.runtime.registry)]);

    // Engine 2 appears while it does not answer its health check yet: it must take no traffic.
    engines[2]!.setFault({ kind: "hang" });
    dns.setSrv(NAME, srv([0, 1, 2]));
    await until("engine 2 discovered", () => stateOf(2) !== undefined);
    expect(stateOf(2)).toBe("down");
    const seenAt = statuses.length;
    await until("more traffic", () => statuses.length > seenAt + 30);
    expect(servedBy.get(idOf(2)) ?? 0).toBe(0);
    engines[2]!.setFault({ kind: "none" });
    await until("engine 2 up", () => stateOf(2) === "up");
    await until("engine 2 serving", () => (servedBy.get(idOf(2)) ?? 0) > 5);

    // Engine 0 vanishes from DNS: handled like an engine going down, its sessions move.
    dns.setSrv(NAME, srv([1, 2]));
    await until("engine 0 gone", () => stateOf(0) === undefined);
    const servedBy0 = servedBy.get(idOf(0)) ?? 0;
    const goneAt = statuses.length;
    await until("more traffic", () => statuses.length > goneAt + 30);
    stop = true;
    await traffic;
    expect(servedBy.get(idOf(0))).toBe(servedBy0);
    expect(statuses.length).toBeGreaterThan(60);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    expect(dns.queries).toBeGreaterThan(3);
  }, 60_000);
});
