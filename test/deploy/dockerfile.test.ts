// The Dockerfile, checked without a Docker engine: stages, non-root user, healthcheck, command and mount path, copied files, and that production dependencies cover everything the code imports.
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, posix } from "node:path";
import { describe, expect, it } from "vitest";
import { LLAMA_PACKAGE } from "../../src/engine/llama-binding.js";
import { byName, podOf, renderBase, repoPath } from "./base.js";
import {
  execForm,
  importGraph,
  isIgnored,
  parseDockerfile,
  readDockerignore,
  type Instruction,
  type Stage,
} from "./dockerfile.js";

const stages = parseDockerfile(readFileSync(repoPath("Dockerfile"), "utf8"));
const build = stages[0]!;
const runtime = stages.at(-1)!;
const ignored = readDockerignore(repoPath(".dockerignore"));
const pkg = JSON.parse(readFileSync(repoPath("package.json"), "utf8")) as {
  dependencies: Record<string, string>;
  devDependencies: Record<string, string>;
  optionalDependencies: Record<string, string>;
  scripts: Record<string, string>;
};

const all = (stage: Stage, keyword: string): Instruction[] =>
  stage.instructions.filter((i) => i.keyword === keyword);
const one = (stage: Stage, keyword: string): Instruction => {
  const found = all(stage, keyword);
  expect(found, `${stage.name ?? stage.image}: one ${keyword}`).toHaveLength(1);
  return found[0]!;
};
const npmCi = (stage: Stage) => all(stage, "RUN").find((r) => /\bnpm ci\b/.test(r.args))?.args ?? "";

describe("the Dockerfile", () => {
  it("has a build stage and a slim Node 20 runtime stage", () => {
    expect(stages.map((s) => s.name)).toEqual(["build", "runtime"]);
    for (const s of stages) expect(s.image).toMatch(/^node:20(\.\d+)*-(bookworm-)?slim$/);
  });

  it("builds with the dev dependencies (npm ci, then the TypeScript build)", () => {
    expect(npmCi(build)).not.toMatch(/--omit=dev|--production/);
    expect(all(build, "RUN").map((r) => r.args)).toContain("npm run build");
    expect(pkg.scripts["build"]).toMatch(/^tsc /);
  });

  it("installs only production dependencies at run time, without the build that `prepare` would start", () => {
    const ci = npmCi(runtime);
    expect(ci).toMatch(/--omit=dev/);
    expect(ci).toMatch(/--omit=optional/);
    // `prepare` runs `npm run build` (tsc, a dev dependency) after every npm ci unless scripts are off.
    expect(pkg.scripts["prepare"]).toBe("npm run build");
    expect(ci).toMatch(/--ignore-scripts/);
    const copies = all(runtime, "COPY").map((c) => c.args);
    expect(copies).toContain("--from=build /app/dist ./dist");
  });

  it("runs as a numeric non-root user (so Kubernetes' runAsNonRoot can verify it)", () => {
    const [uid] = one(runtime, "USER").args.split(":");
    expect(uid).toMatch(/^\d+$/);
    expect(Number(uid)).toBeGreaterThan(0);
    const gateway = byName(renderBase().deployments, "agent-serve");
    expect(podOf(gateway).spec?.securityContext?.runAsUser).toBe(Number(uid));
  });

  it("checks /healthz with node itself (the slim image has no curl)", () => {
    const check = one(runtime, "HEALTHCHECK").args;
    const command = execForm(check.slice(check.indexOf("CMD ") + 4))!;
    expect(command.slice(0, 2)).toEqual(["node", "-e"]);
    expect(command[2]).toMatch(
      /fetch\('http:\/\/127\.0\.0\.1:' \+ \(process\.env\.AGENT_SERVE_PORT \|\| 8000\) \+ '\/healthz'\)/,
    );
    expect(check).not.toMatch(/curl|wget/);
  });

  it("starts `agent-serve gateway` with the config where the Deployment mounts the ConfigMap", () => {
    const entrypoint = execForm(one(runtime, "ENTRYPOINT").args)!;
    const cmd = execForm(one(runtime, "CMD").args)!;
    expect(entrypoint).toEqual(["node", "dist/src/cli.js"]);
    expect(cmd).toEqual(["gateway", "--config", "/etc/agent-serve/gateway.yaml"]);
    expect(one(runtime, "WORKDIR").args).toBe("/app");
    const container = podOf(byName(renderBase().deployments, "agent-serve")).containers[0]!;
    expect(container.command).toBeUndefined(); // the image's entrypoint runs
    expect(container.args).toEqual(cmd);
    const mount = container.volumeMounts?.find((m) => m.mountPath === posix.dirname(cmd[2]!));
    expect(mount?.name).toBe("config");
  });

  it("copies only files that exist and that .dockerignore lets into the context", () => {
    const sources = stages.flatMap((s) =>
      all(s, "COPY")
        .filter((c) => !c.args.startsWith("--from="))
        .flatMap((c) => c.args.split(" ").slice(0, -1)),
    );
    expect(sources.sort()).toEqual(
      [
        "package.json",
        "package-lock.json",
        "package.json",
        "package-lock.json",
        "tsconfig.json",
        "tsconfig.build.json",
        "src",
        // every command the image documents reads these (docs/deployment.md)
        "configs",
        "assets",
      ].sort(),
    );
    for (const source of sources) {
      expect(existsSync(repoPath(source)), source).toBe(true);
      expect(isIgnored(ignored, source), `${source} is in .dockerignore`).toBe(false);
    }
    for (const heavy of [
      "node_modules",
      "dist",
      ".git",
      "test",
      "node_modules/zod/package.json",
      "configs/grafana",
    ])
      expect(isIgnored(ignored, heavy), heavy).toBe(true);
  });
});

describe("production dependencies cover what the compiled code imports", () => {
  const entry = repoPath("dist/src/cli.js");

  it("every package reachable from dist/src/cli.js is in dependencies", () => {
    if (!existsSync(entry))
      throw new Error("dist/src/cli.js is missing: npm run build first (npm test does)");
    const graph = importGraph(entry, repoPath("dist/src"));
    expect(graph.files).toContain("gateway/gateway.js");
    expect(graph.files).toContain("cli/gateway-command.js");
    const missing = [...graph.packages].filter(([name]) => !(name in pkg.dependencies));
    expect(missing.map(([name, file]) => `${name} (imported by ${file})`)).toEqual([]);
    // The gateway needs each of them, so none is left out by --omit=dev.
    expect([...graph.packages.keys()].sort()).toEqual(
      expect.arrayContaining(["pino", "prom-client", "undici", "yaml", "zod"]),
    );
  });

  it("the imports whose specifier cannot be read statically: the llama.cpp engine and the sandbox worker", () => {
    const graph = importGraph(entry, repoPath("dist/src"));
    expect([...graph.opaqueDynamicImports].sort()).toEqual([
      "agent/tools/worker-sandbox.js",
      "engine/llama-binding.js",
    ]);
    // The code runner's worker boots from a string that imports its entry (sandbox-worker.js beside it; tsx only
    // when the source runs as TypeScript, never from dist): that entry's packages must be dependencies too.
    expect(readFileSync(repoPath("dist/src/agent/tools/worker-sandbox.js"), "utf8")).toContain(
      "./sandbox-worker.js",
    );
    const worker = importGraph(repoPath("dist/src/agent/tools/sandbox-worker.js"), repoPath("dist/src"));
    expect([...worker.packages].filter(([name]) => !(name in pkg.dependencies))).toEqual([]);
    expect(worker.opaqueDynamicImports).toEqual([]);
    expect(readFileSync(repoPath("dist/src/engine/llama-binding.js"), "utf8")).toContain("LLAMA_PACKAGE");
    expect(LLAMA_PACKAGE in pkg.optionalDependencies).toBe(true);
    expect(LLAMA_PACKAGE in pkg.dependencies).toBe(false);
  });

  it("the import walker does report dev dependencies and literal dynamic imports (control)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "agent-serve-imports-"));
    try {
      await writeFile(
        join(dir, "a.js"),
        'import { x } from "./b.js";\nimport "node:fs";\nexport * from "@scope/pkg/sub";\n',
      );
      await writeFile(
        join(dir, "b.js"),
        'export const x = await import("vitest/config");\nconst m = import(name);\n',
      );
      const graph = importGraph(join(dir, "a.js"), dir);
      expect(graph.files).toEqual(["a.js", "b.js"]);
      expect([...graph.packages.keys()].sort()).toEqual(["@scope/pkg", "vitest"]);
      expect(graph.opaqueDynamicImports).toEqual(["b.js"]);
      await writeFile(join(dir, "b.js"), 'import "./missing.js";\n');
      expect(() => importGraph(join(dir, "a.js"), dir)).toThrow(/missing\.js, which does not exist/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
