// A gateway started on a manual clock and its timers: probes, queue timeouts, the binding sweep and the request
// path's own timers (an attempt's first-byte timeout, the request deadline) all run on them (nothing of these
// happens until the test moves the clock).
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/core/clock.js";
import { chat, startCluster, type Cluster } from "../helpers/cluster.js";
import {
  post,
  startGatewayFor,
  startScriptedEngine,
  type ScriptedEngine,
  type TestGateway,
} from "../helpers/faulty-engine.js";
import { WatchedTimers, healthChanges, waitUntil } from "../helpers/wait.js";

const PROBE_INTERVAL_MS = 5_000;
const QUEUE_TIMEOUT_MS = 2_000;
const STICKY_TTL_MS = 60_000;

let cluster: Cluster | undefined;
let hung: { engine: ScriptedEngine; gw: TestGateway } | undefined;
afterEach(async () => {
  await cluster?.close();
  cluster = undefined;
  await hung?.gw.close();
  await hung?.engine.close();
  hung = undefined;
});

const FIRST_BYTE_MS = 10_000;
const DEADLINE_MS = 20_000;

/** A gateway on a manual clock in front of one engine that never answers a completion (one attempt each). */
async function startHung(firstByteMs: number) {
  const clock = new ManualClock(1_000_000);
  const timers = new WatchedTimers(clock);
  const engine = await startScriptedEngine({ completion: () => undefined });
  const gw = await startGatewayFor(
    [{ id: "e0", url: engine.url }],
    {
      health: { probe_interval_seconds: 3600, engine_metrics_interval_seconds: 0 },
      upstream: {
        first_byte_timeout_seconds: firstByteMs / 1000,
        request_timeout_seconds: DEADLINE_MS / 1000,
        max_attempts: 1,
      },
    },
    { clock, timers },
  );
  hung = { engine, gw };
  return { engine, gw, timers };
}

async function start(): Promise<{ cluster: Cluster; clock: ManualClock; timers: WatchedTimers }> {
  const clock = new ManualClock(1_000_000);
  const timers = new WatchedTimers(clock);
  cluster = await startCluster(
    [{ id: "e0", tier: "small", maxInflight: 1 }],
    {
      health: { probe_interval_seconds: PROBE_INTERVAL_MS / 1000, failures_to_mark_down: 1 },
      admission: { queue_timeout_seconds: QUEUE_TIMEOUT_MS / 1000, max_queue_size: 4 },
      affinity: { sticky_ttl_seconds: STICKY_TTL_MS / 1000 },
    },
    { clock, timers },
  );
  return { cluster, clock, timers };
}

describe("a gateway on a manual clock", () => {
  it("probes only when its clock says so, and marks a dead engine down on it", async () => {
    const { cluster, clock, timers } = await start();
    const { registry } = cluster.gateway.runtime;
    const backend = registry.get("e0")!;
    // The first probe is due now, and has not run: the clock has not moved.
    expect(timers.nextDueMs()).toBe(clock.nowMs());
    timers.advance(0);
    // It succeeds; the next is scheduled one interval after it, on the manual clock.
    await waitUntil("the next probe scheduled", () => timers.nextDueMs()! > clock.nowMs(), timers.onSchedule);
    expect(backend.state).not.toBe("down");

    await cluster.engines.get("e0")!.close();
    timers.advance(PROBE_INTERVAL_MS - 1);
    expect(backend.state).not.toBe("down"); // not due yet
    timers.advance(1);
    await waitUntil("e0 marked down", () => backend.state === "down", healthChanges(registry));
  });

  it("times a queued request out when its clock passes the queue timeout", async () => {
    const { cluster, timers } = await start();
    const { slots, registry } = cluster.gateway.runtime;
    const backend = registry.get("e0")!;
    // The one slot is held, so the request waits in the queue.
    expect(slots.acquire(backend, undefined)).toBeUndefined();
    const answer = chat(cluster.url, { session: "queued" });
    await waitUntil("the request queued", () => slots.depth === 1, timers.onSchedule);
    timers.advance(QUEUE_TIMEOUT_MS - 1);
    expect(slots.depth).toBe(1);
    timers.advance(1);
    const { status, json } = await answer;
    expect(status).toBe(503);
    expect(json).toMatchObject({ error: { code: "queue_timeout" } });
    slots.release(backend);
  });

  it("sweeps lapsed bindings on its clock", async () => {
    const { cluster, timers } = await start();
    const { bindings } = cluster.gateway.runtime;
    expect((await chat(cluster.url, { session: "swept" })).status).toBe(200);
    expect(bindings.countFor("e0")).toBe(1);
    // The binding lapses after the TTL; the background sweep (every second of the clock) reclaims it.
    timers.advance(STICKY_TTL_MS + 2_000);
    await waitUntil("the binding swept", () => bindings.countFor("e0") === 0, timers.onSchedule);
  });

  it("abandons an attempt at its first-byte timeout on its clock", async () => {
    const { engine, gw, timers } = await startHung(FIRST_BYTE_MS);
    const reached = engine.after("completion");
    const answer = post(gw.url);
    await reached;
    timers.advance(FIRST_BYTE_MS - 1);
    expect(gw.gateway.runtime.registry.get("e0")!.inflight).toBe(1); // still waiting on the engine
    timers.advance(1);
    const { status, text } = await answer;
    expect(status).toBe(504);
    expect(text).toMatch(/first-byte/);
  });

  it("ends a request at its deadline on its clock", async () => {
    // A first-byte timeout past the deadline: the deadline is what ends the request.
    const { engine, gw, timers } = await startHung(DEADLINE_MS * 2);
    const reached = engine.after("completion");
    const answer = post(gw.url);
    await reached;
    timers.advance(DEADLINE_MS);
    const { status, text } = await answer;
    expect(status).toBe(504);
    expect(text).toMatch(/deadline/);
  });
});
