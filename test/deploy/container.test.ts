// The container quick start as documented: the image's entrypoint and the documented arguments, run without
// Docker in a network namespace of their own (as a container has), reached at an address that is not loopback.
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { loadConfigFile } from "../../src/config/load.js";
import { skipWithoutNamespace, userNamespaceUnavailable } from "../helpers/network-namespace.js";
import { repoPath } from "./base.js";
import { execForm, parseDockerfile, type Stage } from "./dockerfile.js";
import type { NamespaceProbe, NamespaceReport } from "./in-namespace.js";

const runtime: Stage = parseDockerfile(readFileSync(repoPath("Dockerfile"), "utf8")).at(-1)!;
const instruction = (keyword: string): string[] =>
  runtime.instructions.filter((i) => i.keyword === keyword).map((i) => i.args);

/** The `docker run` lines of a section of docs/deployment.md, split as a shell splits them (quotes, no expansions). */
function documentedRuns(section: string): string[][] {
  const doc = readFileSync(repoPath("docs/deployment.md"), "utf8");
  const start = doc.indexOf(`\n## ${section}\n`);
  expect(start, `docs/deployment.md has a section '${section}'`).toBeGreaterThanOrEqual(0);
  const end = doc.indexOf("\n## ", start + 1);
  const text = doc.slice(start, end < 0 ? undefined : end);
  return text
    .split("\n")
    .filter((line) => line.startsWith("docker run "))
    .map((line) => [...line.matchAll(/"([^"]*)"|'([^']*)'|(\S+)/g)].map((m) => m[1] ?? m[2] ?? m[3]!));
}

interface DockerRun {
  /** `-p [HOST_IP:]HOST_PORT:CONTAINER_PORT` entries. */
  published: { hostIp: string | undefined; containerPort: number }[];
  mounts: string[];
  image: string;
  /** What follows the image: the arguments to the entrypoint. */
  args: string[];
}

/** Reads `docker run [OPTIONS] IMAGE [ARG...]` (the options the docs use). */
function parseDockerRun(words: string[]): DockerRun {
  expect(words.slice(0, 2)).toEqual(["docker", "run"]);
  const run: DockerRun = { published: [], mounts: [], image: "", args: [] };
  let i = 2;
  for (; i < words.length && words[i]!.startsWith("-"); i++) {
    const option = words[i]!;
    if (option === "--rm" || option === "-d" || option === "-it") continue;
    const value = words[++i]!;
    if (option === "-p") {
      const parts = value.split(":");
      run.published.push({
        hostIp: parts.length === 3 ? parts[0] : undefined,
        containerPort: Number(parts.at(-1)),
      });
    } else if (option === "-v") run.mounts.push(value);
    else if (option !== "-e" && option !== "--name")
      throw new Error(`docker run option ${option} is not modelled`);
  }
  run.image = words[i]!;
  run.args = words.slice(i + 1);
  return run;
}

/** The image's environment (its ENV lines) over a minimal one. */
function imageEnv(): Record<string, string> {
  const env: Record<string, string> = { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: "/tmp" };
  for (const args of instruction("ENV")) {
    const [key, ...value] = args.split("=");
    env[key!] = value.join("=");
  }
  return env;
}

/** The container's own address, as Docker's port publishing reaches it (not loopback). */
const CONTAINER_ADDRESS = "10.88.0.2";

/** Network namespaces without privileges (user namespaces): what this test runs the container command in. */
const canUnshare = !skipWithoutNamespace(
  "the container tests that need a network namespace (unshare -rn)",
  userNamespaceUnavailable(),
);

/** Runs `args` after the image's entrypoint, in the image's workdir layout, inside a fresh network namespace. */
function runInNamespace(
  args: string[],
  probe: Omit<NamespaceProbe, "command" | "cwd" | "env" | "address">,
): NamespaceReport {
  const entrypoint = execForm(instruction("ENTRYPOINT")[0]!)!;
  expect(entrypoint[0]).toBe("node");
  const spec: NamespaceProbe = {
    // The image's node is Node 20 as this one; its /app holds dist/ and configs/ where the repository does.
    command: [process.execPath, ...entrypoint.slice(1), ...args],
    cwd: repoPath(""),
    env: imageEnv(),
    address: CONTAINER_ADDRESS,
    ...probe,
  };
  const result = spawnSync(
    "unshare",
    [
      "-rn",
      process.execPath,
      "--import",
      "tsx",
      repoPath("test/deploy/in-namespace.ts"),
      JSON.stringify(spec),
    ],
    { cwd: repoPath(""), encoding: "utf8", timeout: 60_000 },
  );
  expect(result.status, result.stderr).toBe(0);
  return JSON.parse(result.stdout.trim().split("\n").at(-1)!) as NamespaceReport;
}

describe("the container quick start (docs/deployment.md)", () => {
  it("the image holds what the quick start runs: the CLI as entrypoint, /app laid out as the repository", () => {
    expect(instruction("WORKDIR")).toEqual(["/app"]);
    expect(execForm(instruction("ENTRYPOINT")[0]!)).toEqual(["node", "dist/src/cli.js"]);
    // configs/ (the quick start's and the demo's configs) and assets/ (the agent fleet's workspace and corpus).
    expect(instruction("COPY")).toEqual(expect.arrayContaining(["configs ./configs", "assets ./assets"]));
    expect(existsSync(repoPath("dist/src/cli.js")), "npm run build first (npm test does)").toBe(true);
  });

  it("its config runs every engine inside the container and listens on every interface of it", async () => {
    const config = await loadConfigFile(repoPath("configs/container.yaml"), {});
    expect(config.server.host).toBe("0.0.0.0");
    // Open without keys on purpose (published on the host's loopback only), and saying so.
    expect(config.server.api_keys).toEqual([]);
    expect(config.server.allow_open).toBe(true);
    for (const backend of config.backends) {
      // `start` runs these in the container itself: only then is the container's loopback theirs.
      expect(backend.simulate, backend.id).toBeDefined();
      expect(new URL(backend.base_url).hostname, backend.id).toBe("127.0.0.1");
    }
  });

  it.skipIf(!canUnshare)(
    "the documented gateway command serves: /readyz 200 and a completion at the container's address",
    () => {
      const [run] = documentedRuns("Quick start in a container").map(parseDockerRun);
      expect(run!.image).toBe("agent-serve:0.1.0");
      expect(run!.mounts).toEqual([]); // the config is in the image
      expect(run!.published).toEqual([{ hostIp: "127.0.0.1", containerPort: 8000 }]);
      const healthcheck = instruction("HEALTHCHECK")[0]!.replace(/^.*?CMD\s+/, "");
      const report = runInNamespace(run!.args, {
        port: run!.published[0]!.containerPort,
        listening: "agent-serve gateway listening on",
        get: ["/readyz"],
        chat: {
          model: "Qwen/Qwen2.5-7B-Instruct",
          max_tokens: 4,
          messages: [{ role: "user", content: "hi" }],
        },
        healthcheck: execForm(healthcheck),
      });
      const [readyz, chat] = report.answers;
      expect(readyz, report.output.join("\n")).toMatchObject({ status: 200 });
      expect(JSON.parse(readyz!.body)).toMatchObject({ status: "ready" });
      expect(JSON.parse(readyz!.body).backends.every((b: { state: string }) => b.state === "up")).toBe(true);
      expect(chat!.status).toBe(200);
      expect(JSON.parse(chat!.body)).toMatchObject({
        object: "chat.completion",
        x_agent_serve: { tier: "small" },
      });
      expect(report.healthcheckExit).toBe(0);
      expect(report.exitCode).toBe(0);
    },
  );

  it("the documented agent command runs in the image's layout: its config and assets are there", async () => {
    const run = documentedRuns("Quick start in a container")
      .map(parseDockerRun)
      .find((r) => r.args[0] === "agent");
    expect(run, "a documented `docker run ... agent` line").toBeDefined();
    const entrypoint = execForm(instruction("ENTRYPOINT")[0]!)!;
    // Everything the command reads sits where the image's COPY lines put it.
    for (const copied of ["configs", "assets"]) expect(existsSync(repoPath(copied))).toBe(true);
    const out = await mkdtemp(join(tmpdir(), "agent-serve-image-agent-"));
    try {
      const result = spawnSync(process.execPath, [...entrypoint.slice(1), ...run!.args, "--out", out], {
        cwd: repoPath(""),
        env: imageEnv(),
        encoding: "utf8",
        timeout: 120_000,
      });
      expect(result.status, result.stderr + result.stdout).toBe(0);
      expect(result.stdout).toContain("report: ");
    } finally {
      await rm(out, { recursive: true, force: true });
    }
  }, 150_000);

  it.skipIf(!canUnshare)("the documented sim command is reachable from outside the container", () => {
    const runs = documentedRuns("Quick start in a container").map(parseDockerRun);
    const sim = runs.find((r) => r.args[0] === "sim");
    expect(sim, "a documented `docker run ... sim` line").toBeDefined();
    const port = sim!.published[0]!.containerPort;
    expect(sim!.args).toEqual(expect.arrayContaining(["--host", "0.0.0.0"]));
    const report = runInNamespace(sim!.args, {
      port,
      listening: "agent-serve sim: listening on",
      get: ["/health", "/v1/models"],
      chat: undefined,
      healthcheck: undefined,
    });
    expect(report.answers.map((a) => a.status)).toEqual([200, 200]);
    expect(report.exitCode).toBe(0);
  });
});
