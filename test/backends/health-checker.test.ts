// HealthChecker on an injected clock and timers: probes run when their time comes, never on the wall clock.
import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { HealthChecker, type ProbeResult } from "../../src/backends/health-checker.js";
import { BackendRegistry, type HealthTransition } from "../../src/backends/registry.js";
import { ManualClock, ManualTimers } from "../../src/core/clock.js";
import { eventsOf, waitUntil } from "../helpers/wait.js";

const INTERVAL_MS = 5000;

/**
 * A loopback engine whose GET /health answers `status`; emits "probe" once each answer is sent. While `hung`,
 * it takes probes and never answers them (emitting "hung-probe" as each arrives).
 */
class HealthEndpoint {
  status = 200;
  probes = 0;
  hung = false;
  readonly server: Server = createServer((req, res) => {
    this.probes++;
    if (this.hung) {
      this.server.emit("hung-probe");
      return;
    }
    res.writeHead(req.url === "/health" ? this.status : 404).end();
    res.once("finish", () => this.server.emit("probe"));
  });

  async start(): Promise<string> {
    this.server.listen(0, "127.0.0.1");
    await once(this.server, "listening");
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }
}

let cleanup: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const step of cleanup.reverse()) await step();
  cleanup = [];
});

async function setup(failuresToMarkDown = 1) {
  const engine = new HealthEndpoint();
  const url = await engine.start();
  cleanup.push(
    () =>
      new Promise<void>((resolve) => {
        engine.server.closeAllConnections();
        engine.server.close(() => resolve());
      }),
  );
  const clock = new ManualClock(1_000_000);
  const timers = new ManualTimers(clock);
  const registry = new BackendRegistry(
    [{ id: "e", tier: "small", base_url: url, model: "m", max_inflight: 8, weight: 1 }],
    { failuresToMarkDown, successesToMarkUp: 1 },
    clock,
  );
  const checker = new HealthChecker(registry, { intervalMs: INTERVAL_MS, timeoutMs: 2000 }, clock, timers);
  cleanup.push(() => checker.stop());
  const nextTransition = () =>
    new Promise<HealthTransition>((resolve) => {
      const off = registry.onHealthChange((t) => {
        off();
        resolve(t);
      });
    });
  return { engine, clock, timers, registry, checker, nextTransition };
}

describe("HealthChecker", () => {
  it("probes at start and then every interval of the injected clock, marking the engine down and up", async () => {
    const { engine, timers, clock, checker, nextTransition } = await setup();
    checker.start();
    expect(engine.probes).toBe(0); // nothing runs before the timers do
    expect(timers.nextDueMs()).toBe(clock.nowMs());

    engine.status = 503;
    const down = nextTransition();
    timers.advance(0);
    expect(await down).toMatchObject({ to: "down", cause: "probe" });
    expect(engine.probes).toBe(1);
    // The next probe is one interval after the last one, not sooner.
    expect(timers.nextDueMs()).toBe(clock.nowMs() + INTERVAL_MS);
    timers.advance(INTERVAL_MS - 1);
    expect(timers.size).toBe(1);

    engine.status = 200;
    const up = nextTransition();
    timers.advance(1);
    expect(await up).toMatchObject({ to: "up", cause: "probe" });
    expect(engine.probes).toBe(2);
  });

  it("probes early after a failed request, but not twice within 100 ms", async () => {
    const { engine, timers, clock, checker, nextTransition } = await setup();
    checker.start();
    engine.status = 503;
    const down = nextTransition(); // the first probe's outcome is recorded
    timers.advance(0);
    await down;
    const startedMs = clock.nowMs();
    checker.probeSoon("e"); // too soon after the last probe: ignored
    expect(timers.nextDueMs()).toBe(startedMs + INTERVAL_MS);
    timers.advance(99);
    checker.probeSoon("e");
    expect(timers.nextDueMs()).toBe(startedMs + INTERVAL_MS);
    timers.advance(1);
    checker.probeSoon("e");
    expect(timers.nextDueMs()).toBe(clock.nowMs());
    const probed = once(engine.server, "probe");
    timers.advance(0);
    await probed;
    expect(engine.probes).toBe(2);
  });

  it("starts probes on a fixed grid: a hung probe fails at its timeout and the next starts on time", async () => {
    const FAILURES = 3;
    const TIMEOUT_MS = 2000;
    const { engine, timers, clock, checker, registry } = await setup(FAILURES);
    const results: ProbeResult[] = [];
    checker.onProbe((result) => results.push(result));
    const settled = (count: number) =>
      waitUntil(
        `${count} probes settled`,
        () => results.length >= count,
        (wake) => checker.onProbe(wake),
      );
    checker.start();
    const startMs = clock.nowMs();
    timers.advance(0);
    await settled(1);
    expect(results[0]).toMatchObject({ ok: true, startedAtMs: startMs });

    // The engine hangs 700 ms after the first probe: probes now reach it and never get an answer.
    timers.advance(700);
    const hungAtMs = clock.nowMs();
    engine.hung = true;
    const downs: HealthTransition[] = [];
    registry.onHealthChange((t) => downs.push(t));
    let arrived = 0;
    engine.server.on("hung-probe", () => arrived++);
    for (let probe = 1; probe <= FAILURES; probe++) {
      // The next probe starts on the grid, one interval after the previous one's start (not after its end).
      const dueMs = startMs + probe * INTERVAL_MS;
      expect(timers.nextDueMs()).toBe(dueMs);
      timers.advance(dueMs - clock.nowMs());
      await waitUntil(
        "the probe reached the engine",
        () => arrived === probe,
        eventsOf(engine.server, "hung-probe"),
      );
      // Still waiting one millisecond before its timeout; it fails at it, on the injected clock.
      timers.advance(TIMEOUT_MS - 1);
      expect(results).toHaveLength(probe);
      timers.advance(1);
      await settled(probe + 1);
      expect(results[probe]).toMatchObject({ ok: false, startedAtMs: dueMs, endedAtMs: dueMs + TIMEOUT_MS });
    }
    expect(downs).toMatchObject([{ to: "down", cause: "probe" }]);
    const downAtMs = results[FAILURES]!.endedAtMs;
    // The bound docs/operations.md states: failures x interval + timeout after the engine hung.
    expect(downAtMs - hungAtMs).toBeLessThanOrEqual(FAILURES * INTERVAL_MS + TIMEOUT_MS);
    // The schedule never drifted: the next probe is still on the grid.
    expect(timers.nextDueMs()).toBe(startMs + (FAILURES + 1) * INTERVAL_MS);
  });

  it("stops every pending probe", async () => {
    const { timers, checker } = await setup();
    checker.start();
    expect(timers.size).toBe(1);
    await checker.stop();
    expect(timers.size).toBe(0);
  });
});
