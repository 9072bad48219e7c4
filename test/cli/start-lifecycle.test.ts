// `agent-serve start` and `npm start` as an operator meets them: signals to any of their processes, SIGKILL,
// taken ports, the command on the PATH, --version and one-line errors.
import { spawn } from "node:child_process";
import { mkdtemp, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SMALL_MODEL, chat } from "../helpers/cluster.js";
import { freePorts, runCli, stopProcess, type CliProcess } from "../helpers/processes.js";
import { useTempDirs } from "../helpers/temp-dir.js";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const tempDir = useTempDirs();
let dir: string;
const running: CliProcess[] = [];
beforeAll(async () => {
  dir = await tempDir("agent-serve-start-");
});
afterAll(async () => {
  await Promise.all(running.map((p) => stopProcess(p, "SIGKILL")));
});

interface Demo {
  path: string;
  gatewayPort: number;
  enginePorts: number[];
}

async function demoConfig(name: string): Promise<Demo> {
  const [gatewayPort, ...enginePorts] = await freePorts(3);
  const path = join(dir, name);
  await writeFile(
    path,
    `server: {host: 127.0.0.1, port: ${gatewayPort}}\nbackends:\n` +
      enginePorts
        .map(
          (port, i) =>
            `  - {id: small-${i}, tier: small, base_url: "http://127.0.0.1:${port}", model: ${SMALL_MODEL}, simulate: {profile: instant}}\n`,
        )
        .join(""),
  );
  return { path, gatewayPort: gatewayPort!, enginePorts };
}

/** Resolves when process `pid` has exited, whoever its parent is (tail --pid waits on it for us). */
function pidGone(pid: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const tail = spawn("tail", [`--pid=${pid}`, "-f", "/dev/null"], { stdio: "ignore" });
    tail.once("exit", () => resolve());
    tail.once("error", reject);
  });
}

/** The engines' pids, from start's "started ... simulated engine(s)" log line. */
async function enginePids(start: CliProcess): Promise<number[]> {
  const [line] = await start.waitForLine(/\{[^\n]*simulated engine\(s\)[^\n]*\}/);
  return (JSON.parse(line) as { engines: { pid: number }[] }).engines.map((e) => e.pid);
}

async function startDemo(name: string): Promise<{ start: CliProcess; demo: Demo; pids: number[] }> {
  const demo = await demoConfig(name);
  const start = runCli(["start", "--config", demo.path]);
  running.push(start);
  const pids = await enginePids(start);
  await start.waitForLine(/gateway listening/);
  return { start, demo, pids };
}

describe("agent-serve start stops as a whole", () => {
  it("SIGTERM to start drains, stops its engines, logs 'stopped' and exits 0", async () => {
    const { start, demo, pids } = await startDemo("term.yaml");
    expect((await chat(`http://127.0.0.1:${demo.gatewayPort}`, { session: "s" })).status).toBe(200);
    start.child.kill("SIGTERM");
    expect(await start.exited).toMatchObject({ code: 0 });
    await Promise.all(pids.map(pidGone));
    expect(start.output()).toMatch(/"msg":"stopped"/);
  });

  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    it(`${signal} to one engine stops the gateway and the other engine cleanly (exit 0)`, async () => {
      const { start, pids } = await startDemo(`engine-${signal}.yaml`);
      process.kill(pids[0]!, signal);
      expect(await start.exited).toMatchObject({ code: 0 });
      await Promise.all(pids.map(pidGone));
      expect(start.output()).toMatch(/engine small-0 exited \((code 0|SIG[A-Z]+)\)/);
    });
  }

  it("SIGKILL of start takes its engines with it", async () => {
    const { start, pids } = await startDemo("kill.yaml");
    start.child.kill("SIGKILL");
    await start.exited;
    await Promise.all(pids.map(pidGone));
  });

  it("a taken engine port is one line and exit 1, and what holds the port is never used", async () => {
    const demo = await demoConfig("busy-engine.yaml");
    const squatter: Server = createServer((socket) => socket.destroy());
    let connections = 0;
    squatter.on("connection", () => connections++);
    await new Promise<void>((resolve) => squatter.listen(demo.enginePorts[1], "127.0.0.1", resolve));
    try {
      const start = runCli(["start", "--config", demo.path]);
      running.push(start);
      expect(await start.exited).toMatchObject({ code: 1 });
      const output = start.output();
      expect(output).toContain(`cannot listen on 127.0.0.1:${demo.enginePorts[1]}: the port is taken`);
      expect(output).toMatch(
        /agent-serve start: simulated engine small-1 exited \(code \d+\) before it was ready/,
      );
      expect(output).not.toMatch(/\n\s+at /); // no stack trace
      expect(connections).toBe(0);
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  });

  it("a taken gateway port is one line, exit 1, and the engines it started are stopped", async () => {
    const demo = await demoConfig("busy-gateway.yaml");
    const squatter: Server = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => squatter.listen(demo.gatewayPort, "127.0.0.1", resolve));
    try {
      const start = runCli(["start", "--config", demo.path]);
      running.push(start);
      const pids = await enginePids(start);
      expect(await start.exited).toMatchObject({ code: 1 });
      expect(start.output()).toContain(`cannot listen on 127.0.0.1:${demo.gatewayPort}: the port is taken`);
      expect(start.output()).not.toMatch(/\n\s+at /);
      await Promise.all(pids.map(pidGone));
    } finally {
      await new Promise((resolve) => squatter.close(resolve));
    }
  });

  it("prints a random admin token when the config names none, and /admin takes it", async () => {
    const { start, demo } = await startDemo("admin.yaml");
    const [, token] = await start.waitForLine(/admin API token for this run[^:]*: ([0-9a-f]{32})/);
    const url = `http://127.0.0.1:${demo.gatewayPort}/admin/backends`;
    expect((await fetch(url)).status).toBe(401);
    expect((await fetch(url, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    await stopProcess(start, "SIGTERM");
  });
});

describe("npm start", () => {
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    it(`${signal} to the npm process stops the gateway and every engine`, async () => {
      const demo = await demoConfig(`npm-${signal}.yaml`);
      const npm = spawn("npm", ["start", "--silent", "--", "--config", demo.path], {
        cwd: ROOT,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let output = "";
      const listening = new Promise<void>((resolve, reject) => {
        const onData = (chunk: Buffer): void => {
          output += chunk.toString();
          if (/gateway listening/.test(output)) resolve();
        };
        npm.stdout.on("data", onData);
        npm.stderr.on("data", onData);
        npm.once("exit", () => reject(new Error(`npm start exited early:\n${output}`)));
      });
      const exited = new Promise<number | null>((resolve) => npm.once("exit", (code) => resolve(code)));
      try {
        await listening;
        const pids = (
          JSON.parse(/\{[^\n]*simulated engine\(s\)[^\n]*\}/.exec(output)![0]) as {
            engines: { pid: number }[];
          }
        ).engines.map((e) => e.pid);
        npm.kill(signal);
        await exited;
        await Promise.all(pids.map(pidGone));
        expect(output).toMatch(/"msg":"stopped"/);
      } finally {
        if (npm.exitCode === null) npm.kill("SIGKILL");
      }
    });
  }
});

describe("the command line", () => {
  it("runs as `npx agent-serve` after npm ci, offline, and tells its version", async () => {
    // npx links this package into its own cache (~/.npm/_npx) on first use and runs its `prepare` there, which
    // would rebuild dist/ under the feet of every other test; what it finds in that cache is left over from
    // earlier runs. So: a cache of the test's own, and no lifecycle scripts; the bin lookup is what's tested.
    const cache = await mkdtemp(join(dir, "npm-cache-"));
    const npx = spawn(
      "npx",
      ["--cache", cache, "--offline", "--ignore-scripts", "agent-serve", "--version"],
      {
        cwd: ROOT,
      },
    );
    let output = "";
    let errors = "";
    npx.stdout.on("data", (c: Buffer) => (output += c.toString()));
    npx.stderr.on("data", (c: Buffer) => (errors += c.toString()));
    const code = await new Promise((resolve) => npx.once("exit", resolve));
    expect(code, errors).toBe(0);
    expect(output.trim()).toMatch(/^agent-serve \d+\.\d+\.\d+$/);
  });

  it("says a usage error or an unknown command in one line pointing at --help", async () => {
    const flag = runCli(["gateway", "--nope"]);
    expect(await flag.exited).toMatchObject({ code: 2 });
    expect(flag.output().trim().split("\n")).toHaveLength(1);
    expect(flag.output()).toContain("run 'agent-serve gateway --help'");
    const unknown = runCli(["serve"]);
    expect(await unknown.exited).toMatchObject({ code: 2 });
    expect(unknown.output().trim()).toBe(
      "agent-serve: unknown command 'serve' (run 'agent-serve --help' for the commands)",
    );
  });
});
