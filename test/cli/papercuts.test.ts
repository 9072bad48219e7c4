// The command line's small promises: -v, every study in --help, `hash-key -` from stdin, lower-case usage errors.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { STUDY_NAMES } from "../../src/study/study-names.js";

const CLI_TS = fileURLToPath(new URL("../../src/cli.ts", import.meta.url));

function cli(args: string[], input?: string): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, ["--import", "tsx", CLI_TS, ...args], {
    encoding: "utf8",
    input,
    timeout: 60_000,
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe("command-line papercuts", () => {
  it("-v prints the version as --version does", () => {
    const short = cli(["-v"]);
    expect(short.status).toBe(0);
    expect(short.stdout).toMatch(/^agent-serve \d+\.\d+\.\d+/);
    expect(short.stdout).toBe(cli(["--version"]).stdout);
  }, 60_000);

  it("--help lists every study", () => {
    const help = cli(["--help"]).stdout;
    const line = help.split("\n").find((l) => l.trimStart().startsWith("study"))!;
    for (const name of STUDY_NAMES) expect(line).toContain(name);
  }, 60_000);

  it("hash-key - hashes the key read from stdin, without its line end", () => {
    const expected = createHash("sha256").update("sk-secret").digest("hex");
    expect(cli(["hash-key", "-"], "sk-secret\n")).toMatchObject({ status: 0, stdout: `${expected}\n` });
    expect(cli(["hash-key", "sk-secret"]).stdout).toBe(`${expected}\n`);
    const empty = cli(["hash-key", "-"], "");
    expect(empty.status).toBe(2);
    expect(empty.stderr).toContain("the key read from stdin is empty");
  }, 60_000);

  it("usage errors are lower case, as every other message", () => {
    const bad = cli(["study", "--bogus"]);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/^agent-serve study: unknown option '--bogus'/);
    const unknown = cli(["study", "nope"]);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain(`(the studies: ${STUDY_NAMES.join(", ")}, all)`);
  }, 60_000);
});
