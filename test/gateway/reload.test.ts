// Config reload: validated first; added backends take new sessions only; removed ones are handled like
// an engine going down; a bad file changes nothing.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { loadConfigFile } from "../../src/config/load.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";
import { SMALL_MODEL, chat, metaOf, metricValue, scrape } from "../helpers/cluster.js";
import { useTempDirs } from "../helpers/temp-dir.js";
import { healthChanges, waitUntil } from "../helpers/wait.js";

const TOKEN = "reload-admin-token-0123";

function yaml(engines: { id: string; url: string }[], extra = ""): string {
  return [
    "server: {host: 127.0.0.1, port: 0, admin_token: " + TOKEN + "}",
    "health: {probe_interval_seconds: 3600}",
    "backends:",
    ...engines.map((e) => `  - {id: ${e.id}, tier: small, base_url: "${e.url}", model: ${SMALL_MODEL}}`),
    extra,
  ].join("\n");
}

const tempDir = useTempDirs();

describe("config reload", () => {
  const engines: SimEngineHandle[] = [];
  let gateway: Gateway | undefined;
  afterEach(async () => {
    await gateway?.close(0);
    await Promise.all(engines.splice(0).map((e) => e.close()));
  });

  it("adds and removes backends without dropping requests, and refuses a bad file", async () => {
    for (let i = 0; i < 3; i++) engines.push(await startSimEngine({ model: SMALL_MODEL }));
    const [a, b, c] = engines.map((e, i) => ({ id: `small-${i}`, url: e.url }));
    const dir = await tempDir("agent-serve-reload-");
    const path = join(dir, "gateway.yaml");
    await writeFile(path, yaml([a!, b!]));
    gateway = await Gateway.start(await loadConfigFile(path, {}), {
      logger: pino({ level: "silent" }),
      listen: { host: "127.0.0.1", port: 0 },
      loadConfig: () => loadConfigFile(path, {}),
    });
    const url = gateway.url;
    const reload = () =>
      fetch(`${url}/admin/reload`, { method: "POST", headers: { authorization: `Bearer ${TOKEN}` } });

    const sessions = Array.from({ length: 24 }, (_, i) => `reload-${i}`);
    const before = new Map<string, string>();
    for (const s of sessions) before.set(s, metaOf((await chat(url, { session: s })).json).backend_id);

    // A broken file is refused with the problem named, and the gateway keeps its config.
    await writeFile(path, yaml([a!, b!], "affinity: {sticky_ttl_seconds: -1}"));
    const refused = await reload();
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toContain(
      "affinity.sticky_ttl_seconds",
    );
    expect(metaOf((await chat(url, { session: sessions[0]! })).json).affinity_hit).toBe(true);

    // Add small-2: bound sessions stay; new sessions may land on it.
    await writeFile(path, yaml([a!, b!, c!]));
    const inFlight = Promise.all(sessions.map((s) => chat(url, { session: s })));
    expect((await reload()).status).toBe(200);
    const during = await inFlight;
    expect(during.every((r) => r.status === 200)).toBe(true);
    for (const s of sessions) {
      expect(metaOf((await chat(url, { session: s })).json)).toMatchObject({
        backend_id: before.get(s),
        affinity_hit: true,
      });
    }
    // small-2 takes traffic once its first probe succeeded (reload schedules that probe at once).
    const registry = gateway!.runtime.registry;
    await waitUntil("small-2 up", () => registry.get("small-2")?.state === "up", healthChanges(registry));
    const fresh = await Promise.all(
      Array.from({ length: 30 }, (_, i) => chat(url, { session: `fresh-${i}` })),
    );
    expect(fresh.some((r) => metaOf(r.json).backend_id === "small-2")).toBe(true);

    // Remove small-0: its bindings are broken and counted, its sessions rebind elsewhere.
    const held = gateway.runtime.scheduler.bindingsOf("small-0");
    expect(held).toBeGreaterThan(0);
    const brokenBefore = metricValue(await scrape(url), "agentserve_affinity_broken_total", {
      tier: "small",
    });
    await writeFile(path, yaml([b!, c!]));
    expect((await reload()).status).toBe(200);
    expect(
      metricValue(await scrape(url), "agentserve_affinity_broken_total", { tier: "small" }) - brokenBefore,
    ).toBe(held);
    for (const s of sessions.filter((s) => before.get(s) === "small-0")) {
      expect(metaOf((await chat(url, { session: s })).json)).toMatchObject({ reason: "rebind_backend_down" });
    }
    const listed = (await (
      await fetch(`${url}/admin/backends`, { headers: { authorization: `Bearer ${TOKEN}` } })
    ).json()) as {
      backends: { id: string }[];
    };
    expect(listed.backends.map((x) => x.id)).toEqual(["small-1", "small-2"]);
  });
  it("applies a reloaded affinity.sessionless (load_factor goes the same way: PlacementService.configure)", async () => {
    engines.push(await startSimEngine({ model: SMALL_MODEL }), await startSimEngine({ model: SMALL_MODEL }));
    const list = engines.map((e, i) => ({ id: `small-${i}`, url: e.url }));
    const dir = await tempDir("agent-serve-reload-");
    const path = join(dir, "gateway.yaml");
    await writeFile(path, yaml(list));
    gateway = await Gateway.start(await loadConfigFile(path, {}), {
      logger: pino({ level: "silent" }),
      listen: { host: "127.0.0.1", port: 0 },
      loadConfig: () => loadConfigFile(path, {}),
    });
    const url = gateway.url;
    const templated = [
      { role: "system", content: "You are the release agent." },
      { role: "user", content: "ship it" },
    ];
    expect(metaOf((await chat(url, { messages: templated })).json).reason).toBe("prefix");
    await writeFile(path, yaml(list, "affinity: {sessionless: balancer, load_factor: 0}"));
    const reloaded = await fetch(`${url}/admin/reload`, {
      method: "POST",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(reloaded.status).toBe(200);
    expect(metaOf((await chat(url, { messages: templated })).json).reason).toBe("no_session");
  });

  it("says so when a reload changes nothing, and names the sections that changed otherwise", async () => {
    engines.push(await startSimEngine({ model: SMALL_MODEL }));
    const list = [{ id: "small-0", url: engines.at(-1)!.url }];
    const dir = await tempDir("agent-serve-reload-");
    const path = join(dir, "gateway.yaml");
    await writeFile(path, yaml(list));
    gateway = await Gateway.start(await loadConfigFile(path, {}), {
      logger: pino({ level: "silent" }),
      listen: { host: "127.0.0.1", port: 0 },
      loadConfig: () => loadConfigFile(path, {}),
    });
    expect(gateway.reload(await loadConfigFile(path, {}))).toEqual({ changed: [] });
    await writeFile(path, yaml(list, "affinity: {load_factor: 2}"));
    expect(gateway.reload(await loadConfigFile(path, {})).changed).toEqual(["changed: affinity"]);
  });
});
