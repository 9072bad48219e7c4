// docs/clients-coding-agents.md's command blocks, run as written (bash) inside the loopback-only namespace against
// the demo the doc names (`agent-serve start --config configs/agents.yaml` on 127.0.0.1:8000, private to the
// namespace): each CLI's block exits 0 and prints the scripted closing answer, which it only gets after running
// the listing the engine asked for.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect } from "vitest";
import { namespaceTest as test } from "../helpers/network-namespace.js";
import { CLIS_DIR } from "./clis.js";
import { startNetns, type Netns } from "./netns.js";
import { REPO_ROOT } from "./rig.js";

const DOC = join(REPO_ROOT, "docs", "clients-coding-agents.md");
const CLOSING = "Done. The listing above came from a real tool call your agent ran";

/** The doc's bash blocks: the first sets URL, M and CLIS; each further one runs a CLI. */
function bashBlocks(): string[] {
  return [...readFileSync(DOC, "utf8").matchAll(/```bash\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

test("every command block of docs/clients-coding-agents.md works as written against the scripted demo", async () => {
  const [settings, ...commands] = bashBlocks();
  expect(settings).toContain("URL=http://127.0.0.1:8000");
  expect(commands.length).toBe(4);
  const ns: Netns = await startNetns();
  const home = mkdtempSync(join(tmpdir(), "agent-serve-doc-"));
  try {
    const gateway = ns.spawn(
      process.execPath,
      [join(REPO_ROOT, "dist", "src", "cli.js"), "start", "--config", "configs/agents.yaml"],
      { cwd: REPO_ROOT, timeoutMs: 600_000 },
    );
    await gateway.waitForLine(/gateway listening/);
    for (const command of commands) {
      // the block as written, after the settings block; CLIS as the tests install them (or AGENT_CLIS_DIR)
      const script = `set -e\n${settings!.replace(/^CLIS=.*$/m, `CLIS=${CLIS_DIR}`)}\n${command}`;
      const run = ns.spawn("bash", ["-c", script], {
        cwd: REPO_ROOT,
        env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", HOME: home },
        timeoutMs: 150_000,
      });
      const exit = await run.exited;
      expect(
        { exit, tail: run.output().slice(-300) },
        `${command}\n${run.output()}\n${gateway.output()}`,
      ).toMatchObject({
        exit: { code: 0, timedOut: false },
      });
      expect(run.output(), command).toContain(CLOSING);
    }
  } finally {
    await ns.close();
    rmSync(home, { recursive: true, force: true });
  }
}, 900_000);
