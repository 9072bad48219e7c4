// Gray failures: engines whose /health passes while their completions fail or hang are ejected anyway.
import { afterEach, describe, expect, it } from "vitest";
import { ManualClock } from "../../src/core/clock.js";
import type { HealthTransition } from "../../src/backends/registry.js";
import { metricValue, scrape } from "../helpers/cluster.js";
import {
  answerOk,
  post,
  startGatewayFor,
  startScriptedEngine,
  type ScriptedEngine,
  type TestGateway,
} from "../helpers/faulty-engine.js";

const FAST_PROBES = { probe_interval_seconds: 0.05, probe_timeout_seconds: 1 };

function nextTransition(gw: TestGateway, backendId: string, to: "up" | "down"): Promise<HealthTransition> {
  return new Promise((resolve) => {
    const off = gw.gateway.runtime.registry.onHealthChange((t) => {
      if (t.backend.id !== backendId || t.to !== to) return;
      off();
      resolve(t);
    });
  });
}

/** Resolves when the engine has answered `count` more probes (the gateway's own probe timer, as events). */
async function probesPass(engine: ScriptedEngine, count: number): Promise<void> {
  const target = engine.probes + count;
  await engine.after("probe", count);
  expect(engine.probes).toBeGreaterThanOrEqual(target);
}

describe("outlier ejection", () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  async function engines(): Promise<{ bad: ScriptedEngine; good: ScriptedEngine }> {
    const bad = await startScriptedEngine({
      completion: ({ res }) => res.writeHead(500, { "content-type": "application/json" }).end("{}"),
    });
    const good = await startScriptedEngine({ completion: ({ res }) => answerOk(res) });
    closers.push(
      () => bad.close(),
      () => good.close(),
    );
    return { bad, good };
  }

  it("ejects an engine that fails every completion while /health passes, and probes return it only after the ejection", async () => {
    const { bad, good } = await engines();
    const clock = new ManualClock(1_000_000);
    const gw = await startGatewayFor(
      [
        { id: "bad", url: bad.url },
        { id: "good", url: good.url },
      ],
      { health: { ...FAST_PROBES, ejection_base_seconds: 30 } },
      { clock },
    );
    closers.push(() => gw.close());
    const ejected = nextTransition(gw, "bad", "down");
    let failedFirst = 0;
    for (let i = 0; i < 40; i++) {
      const answer = await post(gw.url, undefined, { "x-session-id": `s-${i}` });
      expect(answer.status).toBe(200);
      if ((JSON.parse(answer.text) as { x_agent_serve: { attempts: number } }).x_agent_serve.attempts > 1)
        failedFirst++;
    }
    expect(await ejected).toMatchObject({ cause: "request", ejectedUntilMs: 1_030_000 });
    // Three failed requests eject it; before, every new session hashed to it paid a failed attempt.
    expect(bad.completions).toBe(3);
    expect(failedFirst).toBe(3);

    // Its probes keep passing, yet it stays out until the ejection time has passed.
    await probesPass(bad, 5);
    expect(gw.gateway.runtime.registry.get("bad")!.state).toBe("down");
    const back = nextTransition(gw, "bad", "up");
    clock.advance(30_000);
    expect(await back).toMatchObject({ cause: "probe" });
    const metrics = await scrape(gw.url);
    expect(
      metricValue(metrics, "agentserve_backend_ejections_total", { backend: "bad", cause: "request" }),
    ).toBe(1);
  });

  it("never ejects the last engine of a tier: it keeps serving and the ejection is reported", async () => {
    const { bad } = await engines();
    const gw = await startGatewayFor([{ id: "only", url: bad.url }], { health: FAST_PROBES });
    closers.push(() => gw.close());
    for (let i = 0; i < 6; i++) expect((await post(gw.url)).status).toBe(502);
    expect(gw.gateway.runtime.registry.get("only")!.state).toBe("up");
    expect(bad.completions).toBe(6);
    const metrics = await scrape(gw.url);
    expect(metricValue(metrics, "agentserve_backend_ejections_withheld_total", { backend: "only" })).toBe(2);
  });

  it("ejects a hung engine (healthy /health, token counters still) while requests wait on it, and retries them", async () => {
    const hung = await startScriptedEngine({ completion: () => undefined }); // never answers
    const good = await startScriptedEngine({ completion: ({ res }) => answerOk(res) });
    closers.push(
      () => hung.close(),
      () => good.close(),
    );
    const clock = new ManualClock(1_000_000);
    const gw = await startGatewayFor(
      [
        { id: "hung", url: hung.url },
        { id: "good", url: good.url },
      ],
      { health: { ...FAST_PROBES, engine_metrics_interval_seconds: 0.02, stall_seconds: 10 } },
      { clock },
    );
    closers.push(() => gw.close());
    const registry = gw.gateway.runtime.registry;
    const backends = registry.tier("small");
    let session = "";
    for (let i = 0; session === ""; i++) {
      const s = `hang-${i}`;
      if (gw.gateway.runtime.scheduler.ranking(s, backends)[0]!.id === "hung") session = s;
    }
    const ejected = nextTransition(gw, "hung", "down");
    const reached = hung.after("completion");
    const answer = post(
      gw.url,
      { model: "m", stream: true, messages: [{ role: "user", content: "hi" }] },
      {
        "x-session-id": session,
      },
    );
    const hungBackend = registry.get("hung")!;
    await reached;
    expect(hungBackend.inflight).toBe(1);
    // Several readings while busy (the counter stays still); then ten seconds pass on the gateway's clock.
    // The poller reads one engine at a time: once the engine served a second read, the first one was taken in.
    await hung.after("metrics", 2);
    expect(hungBackend.engineLoad).toBeDefined();
    clock.advance(10_000);
    expect(await ejected).toMatchObject({ cause: "progress" });
    const done = await answer;
    expect(done.status).toBe(200);
    expect(done.headers.get("x-agent-serve-backend")).toBe("good");
  });

  it("streams have a first-byte timeout of their own (60 s by default), shorter than whole answers'", async () => {
    const hung = await startScriptedEngine({ completion: () => undefined });
    closers.push(() => hung.close());
    const gw = await startGatewayFor([{ id: "hung", url: hung.url }], {
      upstream: { stream_first_byte_timeout_seconds: 0.2, max_attempts: 1 },
    });
    closers.push(() => gw.close());
    expect(gw.config.upstream.first_byte_timeout_seconds).toBe(300);
    const streamed = await post(gw.url, {
      model: "m",
      stream: true,
      messages: [{ role: "user", content: "x" }],
    });
    expect(streamed.status).toBe(504);
    expect(JSON.parse(streamed.text)).toMatchObject({ error: { code: "upstream_timeout" } });
    const defaults = await startGatewayFor([{ id: "hung", url: hung.url }]);
    closers.push(() => defaults.close());
    expect(defaults.config.upstream.stream_first_byte_timeout_seconds).toBe(60);
  });
});
