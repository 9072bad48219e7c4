// The agent-serve command as users run it: help, config errors, `gateway` and `start` with graceful stop.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";
import { SMALL_MODEL, chat, metaOf } from "../helpers/cluster.js";
import { freePorts, runCli, spawnSim, stopProcess } from "../helpers/processes.js";
import { useTempDirs } from "../helpers/temp-dir.js";
import { waitUntil } from "../helpers/wait.js";

const tempDir = useTempDirs();
let dir: string;
beforeAll(async () => {
  dir = await tempDir("agent-serve-cli-");
});

async function writeConfig(name: string, yaml: string): Promise<string> {
  const path = join(dir, name);
  await writeFile(path, yaml);
  return path;
}

describe("agent-serve command line", () => {
  it("documents every command and exits 0 on --help", async () => {
    const top = runCli(["--help"]);
    expect(await top.exited).toMatchObject({ code: 0 });
    for (const command of ["start", "gateway", "sim"]) expect(top.output()).toContain(command);
    for (const command of ["start", "gateway", "sim"]) {
      const proc = runCli([command, "--help"]);
      expect(await proc.exited).toMatchObject({ code: 0 });
      expect(proc.output()).toContain(`agent-serve ${command}`);
      expect(proc.output()).toMatch(/--/);
    }
  });

  it("exits 2 with the field's path on a bad config, and on an unknown flag", async () => {
    const path = await writeConfig(
      "bad.yaml",
      "backends:\n  - {id: a, tier: small, base_url: 'ftp://x', model: m}\naffinity: {sticky_tll_seconds: 5}\n",
    );
    const bad = runCli(["gateway", "--config", path]);
    expect(await bad.exited).toMatchObject({ code: 2 });
    expect(bad.output()).toContain("backends[0].base_url: must be an http(s) URL");
    expect(bad.output()).toContain("affinity.sticky_tll_seconds: unknown key");

    const flag = runCli(["gateway", "--nope"]);
    expect(await flag.exited).toMatchObject({ code: 2 });
  });
});

describe("agent-serve gateway process", () => {
  // The engine in this process: the test waits on its events (the request arriving) instead of polling.
  let sim: SimEngineHandle;
  beforeAll(async () => {
    sim = await startSimEngine({ model: SMALL_MODEL });
  });
  afterAll(() => sim.close());

  it("on SIGTERM lets an in-flight request finish, refuses nothing it accepted, and exits 0", async () => {
    const path = await writeConfig(
      "one.yaml",
      `server: {host: 127.0.0.1, port: 0}\nbackends:\n  - {id: small-0, tier: small, base_url: "${sim.url}", model: ${SMALL_MODEL}}\n`,
    );
    const gateway = runCli(["gateway", "--config", path]);
    const [, port] = await gateway.waitForLine(/listening on 127\.0\.0\.1:(\d+)/);
    const url = `http://127.0.0.1:${port}`;
    expect((await chat(url, { session: "before-stop" })).status).toBe(200);

    sim.setFault({ kind: "slow", extraLatencyMs: 400 });
    const received = sim.stats().requestsReceived;
    const inFlight = chat(url, { session: "during-stop" });
    // Signal only once the gateway really has the request in flight on the engine.
    await waitUntil(
      "the request on the engine",
      () => sim.stats().requestsReceived === received + 1,
      sim.onChange,
    );
    gateway.child.kill("SIGTERM");
    const result = await inFlight;
    expect(result.status).toBe(200);
    expect(metaOf(result.json).session_id).toBe("during-stop");
    expect(await gateway.exited).toMatchObject({ code: 0 });
    sim.setFault({ kind: "none" });
  });
});

describe("SIGHUP reload", () => {
  it("applies a good file and reports a bad one, keeping the running config", async () => {
    const sims = [await spawnSim(["--model", SMALL_MODEL]), await spawnSim(["--model", SMALL_MODEL])];
    const token = "sighup-admin-token-0123";
    const config = (urls: string[], extra = "") =>
      `server: {host: 127.0.0.1, port: 0, admin_token: ${token}}\nbackends:\n` +
      urls
        .map((u, i) => `  - {id: small-${i}, tier: small, base_url: "${u}", model: ${SMALL_MODEL}}\n`)
        .join("") +
      extra;
    const path = await writeConfig("hup.yaml", config([sims[0]!.url]));
    const gateway = runCli(["gateway", "--config", path]);
    try {
      const [, port] = await gateway.waitForLine(/listening on 127\.0\.0\.1:(\d+)/);
      const backends = async () =>
        (
          (await (
            await fetch(`http://127.0.0.1:${port}/admin/backends`, {
              headers: { authorization: `Bearer ${token}` },
            })
          ).json()) as { backends: { id: string }[] }
        ).backends.map((b) => b.id);
      expect(await backends()).toEqual(["small-0"]);

      await writeFile(path, config([sims[0]!.url, sims[1]!.url]));
      gateway.child.kill("SIGHUP");
      await gateway.waitForLine(/config reloaded/);
      expect(await backends()).toEqual(["small-0", "small-1"]);

      await writeFile(path, config([sims[0]!.url], "health: {failures_to_mark_down: 0}\n"));
      gateway.child.kill("SIGHUP");
      await gateway.waitForLine(
        /health\.failures_to_mark_down: must be a positive integer.*config reload refused/,
      );
      expect(await backends()).toEqual(["small-0", "small-1"]);
    } finally {
      await stopProcess(gateway);
      await Promise.all(sims.map((s) => stopProcess(s)));
    }
  });
});

describe("agent-serve start (the npm start demo)", () => {
  it("starts the config's simulated engines and the gateway, serves, and stops everything on SIGINT", async () => {
    const [gatewayPort, small0, small1] = await freePorts(3);
    const path = await writeConfig(
      "start.yaml",
      `server: {host: 127.0.0.1, port: ${gatewayPort}}
backends:
  - {id: small-0, tier: small, base_url: "http://127.0.0.1:${small0}", model: ${SMALL_MODEL}, simulate: {profile: instant}}
  - {id: small-1, tier: small, base_url: "http://127.0.0.1:${small1}", model: ${SMALL_MODEL}, simulate: {profile: instant}}
`,
    );
    const start = runCli(["start", "--config", path]);
    await start.waitForLine(/gateway listening/);
    const url = `http://127.0.0.1:${gatewayPort}`;
    const first = await chat(url, { session: "demo" });
    const second = await chat(url, { session: "demo" });
    expect(metaOf(first.json)).toMatchObject({ affinity_hit: false });
    expect(metaOf(second.json)).toMatchObject({
      affinity_hit: true,
      backend_id: metaOf(first.json).backend_id,
    });

    start.child.kill("SIGINT");
    expect(await start.exited).toMatchObject({ code: 0 });
    // The engines went with it: their ports refuse connections now.
    for (const port of [small0, small1]) {
      await expect(fetch(`http://127.0.0.1:${port}/health`)).rejects.toThrow();
    }
  });
});
