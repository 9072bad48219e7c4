// The workspace file reader: reads what is inside, refuses every way out (.., absolute, symlinks).
import { mkdtemp, mkdir, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WORKSPACE_DIR } from "../../src/agent/assets.js";
import { readFileTool } from "../../src/agent/tools/read-file.js";
import type { AgentTool } from "../../src/agent/tools/tool.js";

const signal = new AbortController().signal;

describe("read_file over the bundled workspace", () => {
  it("reads a file and lists the workspace in its schema", async () => {
    const tool = await readFileTool(WORKSPACE_DIR);
    const result = await tool.run({ path: "notes/capacity-plan.md" }, signal);
    expect(result.ok).toBe(true);
    expect(result.output).toContain("Each engine holds 48000 KV blocks");
    expect(tool.parameters.properties["path"]!["enum"]).toContain("data/latencies.csv");
    expect(tool.parameters.properties["path"]!["enum"]).toContain("README.md");
  });
});

describe("read_file containment", () => {
  let root: string;
  let outside: string;
  let tool: AgentTool;

  beforeAll(async () => {
    const base = await mkdtemp(join(tmpdir(), "agent-read-file-"));
    root = join(base, "workspace");
    outside = join(base, "secret.txt");
    await mkdir(join(root, "notes"), { recursive: true });
    await writeFile(join(root, "notes", "a.txt"), "inside");
    await writeFile(join(root, "big.txt"), "x".repeat(2000));
    await writeFile(join(root, "long.txt"), "y".repeat(500));
    await writeFile(outside, "the secret");
    await symlink(outside, join(root, "link-out.txt"));
    await symlink(join(root, "notes", "a.txt"), join(root, "link-in.txt"));
    tool = await readFileTool(root, { timeoutMs: 1000, memoryBytes: 1000, outputChars: 100 });
  });

  afterAll(async () => {
    await rm(join(root, ".."), { recursive: true, force: true });
  });

  it.each([
    ["../secret.txt", "'../secret.txt' is outside the workspace"],
    ["notes/../../secret.txt", "'notes/../../secret.txt' is outside the workspace"],
    ["..", "'..' is outside the workspace"],
    [".", "'.' is outside the workspace"],
    ["link-out.txt", "'link-out.txt' leads outside the workspace"],
    ["/etc/passwd", "absolute paths are refused: give a path inside the workspace"],
    ["notes/a.txt\0.png", "the path contains a NUL byte"],
    ["missing.txt", "no such file 'missing.txt'"],
    ["notes", "'notes' is not a file"],
  ])("refuses %j", async (path, message) => {
    expect(await tool.run({ path }, signal)).toEqual({ ok: false, output: `error: ${message}` });
  });

  it("follows a symlink that stays inside, and normalises a path that does", async () => {
    expect(await tool.run({ path: "link-in.txt" }, signal)).toEqual({ ok: true, output: "inside" });
    expect(await tool.run({ path: "notes/../notes/a.txt" }, signal)).toEqual({ ok: true, output: "inside" });
  });

  it("refuses a file over its memory limit and cuts output at its cap", async () => {
    expect(await tool.run({ path: "big.txt" }, signal)).toEqual({
      ok: false,
      output: "error: 'big.txt' has 2000 bytes, more than the 1000 this tool reads",
    });
    const long = await tool.run({ path: "long.txt" }, signal);
    expect(long.ok).toBe(true);
    expect(long.output).toHaveLength(100);
    expect(long.output).toContain("[output cut: ");
  });

  it("refuses a missing or non-string path", async () => {
    expect(await tool.run({}, signal)).toEqual({
      ok: false,
      output: "error: argument 'path' must be a string",
    });
    expect(await tool.run({ path: ["a"] }, signal)).toEqual({
      ok: false,
      output: "error: argument 'path' must be a string",
    });
  });
});
