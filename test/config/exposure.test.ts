// Closed by default: off loopback the gateway needs client keys (from the file or AGENT_SERVE_API_KEYS) or allow_open.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { isLoopbackHost, openExposureProblem } from "../../src/config/exposure.js";
import { ConfigError, parseConfig } from "../../src/config/load.js";

const BACKENDS = [{ id: "a", tier: "small", base_url: "http://127.0.0.1:8001", model: "m" }];
const HASH = createHash("sha256").update("sk-team-a").digest("hex");
const OTHER = createHash("sha256").update("sk-team-b").digest("hex");
const CLI_TS = fileURLToPath(new URL("../../src/cli.ts", import.meta.url));

describe("closed by default", () => {
  it("knows loopback hosts from the rest", () => {
    for (const host of ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "::ffff:127.0.0.1"])
      expect(isLoopbackHost(host), host).toBe(true);
    for (const host of ["0.0.0.0", "::", "10.0.0.5", "gateway.internal", "128.0.0.1"])
      expect(isLoopbackHost(host), host).toBe(false);
  });

  it("refuses a non-loopback host without keys unless allow_open, and names the ways out", () => {
    const config = (server: Record<string, unknown>) => parseConfig({ server, backends: BACKENDS }, "t.yaml");
    const problem = openExposureProblem(config({ host: "0.0.0.0" }));
    expect(problem).toMatch(/^server\.host: 0\.0\.0\.0 is reachable from other machines/);
    expect(problem).toContain("server.allow_open: true");
    expect(problem).toContain("AGENT_SERVE_API_KEYS");
    expect(openExposureProblem(config({ host: "0.0.0.0", allow_open: true }))).toBeUndefined();
    expect(openExposureProblem(config({ host: "0.0.0.0", api_keys: [{ sha256: HASH }] }))).toBeUndefined();
    expect(openExposureProblem(config({ host: "127.0.0.1" }))).toBeUndefined();
  });

  it("adds the key hashes of AGENT_SERVE_API_KEYS to the file's, with their agent ids", () => {
    const config = parseConfig(
      { server: { host: "0.0.0.0", api_keys: [{ sha256: HASH }] }, backends: BACKENDS },
      "t.yaml",
      { AGENT_SERVE_API_KEYS: `${OTHER}:team-b,\n ${HASH}` },
    );
    expect(config.server.api_keys).toEqual([
      { sha256: HASH },
      { sha256: OTHER, agent_id: "team-b" },
      { sha256: HASH },
    ]);
    expect(openExposureProblem(config)).toBeUndefined();
  });

  it("reports a malformed hash from the environment as the schema does one from the file", () => {
    let error: unknown;
    try {
      parseConfig({ backends: BACKENDS }, "t.yaml", { AGENT_SERVE_API_KEYS: "sk-not-a-hash" });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems[0]).toMatch(
      /^server\.api_keys\[0\]\.sha256: must be the hex SHA-256/,
    );
  });

  it("`agent-serve gateway` on 0.0.0.0 without keys exits 2 with the reason, before it listens", async () => {
    const dir = await mkdtemp(join(tmpdir(), "agent-serve-open-"));
    try {
      const file = join(dir, "open.yaml");
      await writeFile(
        file,
        `server: {host: 0.0.0.0, port: 0}\nbackends:\n  - {id: a, tier: small, base_url: "http://127.0.0.1:9", model: m}\n`,
      );
      const env = { ...process.env };
      delete env["AGENT_SERVE_API_KEYS"];
      const run = spawnSync(process.execPath, ["--import", "tsx", CLI_TS, "gateway", "--config", file], {
        encoding: "utf8",
        env,
        timeout: 60_000,
      });
      expect(run.status).toBe(2);
      expect(run.stderr).toContain("server.host: 0.0.0.0 is reachable from other machines");
      expect(run.stdout).not.toContain("listening");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
