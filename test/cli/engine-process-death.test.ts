// Real child processes: a simulated engine killed with SIGKILL mid-traffic costs no non-streaming request.
import { afterAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../src/gateway/gateway.js";
import { SMALL_MODEL, chat, metaOf, metricValue, scrape } from "../helpers/cluster.js";
import { gatewayOverSims, spawnSim, stopProcess, type CliProcess } from "../helpers/processes.js";

describe("engine process killed mid-traffic", () => {
  const sims: CliProcess[] = [];
  let gateway: Gateway | undefined;
  afterAll(async () => {
    await gateway?.close(0);
    await Promise.all(sims.map((s) => stopProcess(s, "SIGKILL")));
  });

  it("fails over every request, breaks exactly the dead engine's bindings and rebinds its sessions", async () => {
    const engines = await Promise.all(
      ["small-0", "small-1", "small-2"].map(() => spawnSim(["--model", SMALL_MODEL])),
    );
    sims.push(...engines);
    gateway = await gatewayOverSims(engines, SMALL_MODEL, {
      failures_to_mark_down: 2,
      probe_interval_seconds: 30,
    });
    const url = gateway.url;

    const sessions = Array.from({ length: 24 }, (_, i) => `proc-${i}`);
    const placement = new Map<string, string>();
    for (const session of sessions)
      placement.set(session, metaOf((await chat(url, { session })).json).backend_id);
    const victim = "small-1";
    const held = sessions.filter((s) => placement.get(s) === victim).length;
    expect(held).toBeGreaterThan(0);

    // Traffic from every session keeps flowing while the victim's process is killed.
    let kill: Promise<void> | undefined;
    const statuses: number[] = [];
    await Promise.all(
      sessions.map(async (session, i) => {
        for (let turn = 0; turn < 4; turn++) {
          if (i === 0 && turn === 1) kill = stopProcess(engines[1]!, "SIGKILL");
          const { status, json } = await chat(url, { session, maxTokens: 16 });
          statuses.push(status);
          if (status === 200 && placement.get(session) !== victim)
            expect(metaOf(json).backend_id).toBe(placement.get(session));
        }
      }),
    );
    await kill;
    expect(statuses.filter((s) => s !== 200)).toEqual([]);

    for (const session of sessions.filter((s) => placement.get(s) === victim)) {
      const meta = metaOf((await chat(url, { session })).json);
      expect(meta.backend_id).not.toBe(victim);
      expect(meta.affinity_hit).toBe(true);
    }
    const metrics = await scrape(url);
    expect(metricValue(metrics, "agentserve_affinity_broken_total", { tier: "small" })).toBe(held);
    expect(metricValue(metrics, "agentserve_backend_up", { backend: victim })).toBe(0);
  });
});
