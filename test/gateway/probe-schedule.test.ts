// Probes on schedule in a running gateway: a hung engine is marked down within failures x interval + timeout
// (on an injected clock), and the non-streaming request waiting on it is answered by another engine.
import type { ServerResponse } from "node:http";
import { afterEach, describe, expect, it } from "vitest";
import type { HealthTransition } from "../../src/backends/registry.js";
import { ManualClock, ManualTimers } from "../../src/core/clock.js";
import { answerOk, post, startGatewayFor, startScriptedEngine } from "../helpers/faulty-engine.js";

const INTERVAL_MS = 5000;
const TIMEOUT_MS = 2000;
const FAILURES = 2;

describe("health probes on schedule", () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  it("marks a hung engine down in time and retries the non-streaming request waiting on it elsewhere", async () => {
    let hung = false;
    const heldProbes: ServerResponse[] = [];
    const stuck = await startScriptedEngine({
      completion: () => undefined, // never answers a completion
      health: (res) => {
        if (hung) heldProbes.push(res);
        else res.writeHead(200, { "content-type": "application/json" }).end("{}");
      },
    });
    const good = await startScriptedEngine({ completion: ({ res }) => answerOk(res) });
    closers.push(
      () => stuck.close(),
      () => good.close(),
    );
    const clock = new ManualClock(1_000_000);
    const timers = new ManualTimers(clock);
    const gw = await startGatewayFor(
      [
        { id: "stuck", url: stuck.url },
        { id: "good", url: good.url },
      ],
      {
        health: {
          probe_interval_seconds: INTERVAL_MS / 1000,
          probe_timeout_seconds: TIMEOUT_MS / 1000,
          failures_to_mark_down: FAILURES,
          // No engine readings: the probes alone find the hung engine here.
          engine_metrics_interval_seconds: 0,
        },
      },
      { clock, timers },
    );
    closers.push(() => gw.close());
    const { registry, scheduler } = gw.gateway.runtime;
    // The first probes (due at start) pass.
    const firstProbes = Promise.all([stuck.after("probe"), good.after("probe")]);
    timers.advance(0);
    await firstProbes;

    let session = "";
    for (let i = 0; session === ""; i++)
      if (scheduler.ranking(`hung-${i}`, registry.tier("small"))[0]!.id === "stuck") session = `hung-${i}`;
    hung = true;
    const hungAtMs = clock.nowMs();
    let downAtMs: number | undefined;
    const down = new Promise<HealthTransition>((resolve) =>
      registry.onHealthChange((t) => {
        if (t.backend.id !== "stuck" || t.to !== "down") return;
        downAtMs = clock.nowMs();
        resolve(t);
      }),
    );
    const reached = stuck.after("completion");
    const answer = post(
      gw.url,
      { model: "m", messages: [{ role: "user", content: "hi" }] },
      {
        "x-session-id": session,
      },
    );
    await reached; // the request waits on the hung engine, nothing sent to its client yet

    for (let probe = 1; probe <= FAILURES; probe++) {
      // The next probes are due on the grid: the good engine's passes, the stuck one's waits ...
      const arrived = stuck.after("probe");
      const goodProbed = new Promise<void>((resolve) => {
        const off = gw.gateway.probes.onProbe((result) => {
          if (result.backendId !== "good") return;
          off();
          resolve();
        });
      });
      timers.advance(INTERVAL_MS - (probe === 1 ? 0 : TIMEOUT_MS));
      await Promise.all([arrived, goodProbed]);
      const failed = new Promise<void>((resolve) => {
        const off = gw.gateway.probes.onProbe((result) => {
          if (result.backendId !== "stuck") return;
          expect(result.ok).toBe(false);
          off();
          resolve();
        });
      });
      timers.advance(TIMEOUT_MS); // ... and fails at its timeout
      await failed;
    }
    expect(await down).toMatchObject({ to: "down", cause: "probe" });
    expect(downAtMs! - hungAtMs).toBeLessThanOrEqual(FAILURES * INTERVAL_MS + TIMEOUT_MS);

    const done = await answer;
    expect(done.status).toBe(200);
    expect(done.headers.get("x-agent-serve-backend")).toBe("good");
    expect(good.completions).toBe(1);
    for (const res of heldProbes) res.destroy();
  });
});
