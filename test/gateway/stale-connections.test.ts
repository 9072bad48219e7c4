// Kept-alive engine connections closed under the gateway: retried on a fresh connection, closed first when idle.
import { afterEach, describe, expect, it } from "vitest";
import { metricValue, scrape } from "../helpers/cluster.js";
import { answerOk, post, startGatewayFor, startScriptedEngine } from "../helpers/faulty-engine.js";

describe("stale upstream connections", () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  it("an engine that answers once per connection (resetting reused ones) fails no request of a one-engine tier", async () => {
    const engine = await startScriptedEngine({
      completion: ({ res, socket, requestOnConnection }) => {
        if (requestOnConnection > 1)
          socket.destroy(); // the reused connection dies before any answer byte
        else answerOk(res);
      },
    });
    closers.push(() => engine.close());
    const gw = await startGatewayFor([{ id: "only", url: engine.url }]);
    closers.push(() => gw.close());
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) statuses.push((await post(gw.url)).status);
    expect(statuses.filter((s) => s !== 200)).toEqual([]);
    // Not the engine's fault: no failed attempt was counted against it.
    const backend = gw.gateway.runtime.registry.get("only")!;
    expect(backend.state).toBe("up");
    const metrics = await scrape(gw.url);
    expect(
      metricValue(metrics, "agentserve_backend_ejections_withheld_total", { backend: "only" }) ?? 0,
    ).toBe(0);
  });

  it("closes idle pooled connections itself, before the engine's own keep-alive runs out", async () => {
    const engine = await startScriptedEngine({
      completion: ({ res }) => answerOk(res),
      keepAliveTimeoutMs: 60_000,
    });
    closers.push(() => engine.close());
    const gw = await startGatewayFor([{ id: "only", url: engine.url }], {
      upstream: { idle_connection_timeout_seconds: 0.3 },
    });
    closers.push(() => gw.close());
    expect((await post(gw.url)).status).toBe(200);
    const closed = engine.nextClose();
    // The gateway closes it (0.3 s idle), long before the engine's own 60 s keep-alive would.
    await closed;
    const defaults = await startGatewayFor([{ id: "only", url: engine.url }]);
    closers.push(() => defaults.close());
    expect(defaults.config.upstream.idle_connection_timeout_seconds).toBeLessThan(5);
  });
});
