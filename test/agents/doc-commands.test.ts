// docs/clients-coding-agents.md's command blocks, run as written (bash) inside the loopback-only namespace against
// both demos the doc names, each started with the doc's own command on 127.0.0.1:8000 (private to the namespace):
// `npm start` (configs/gateway.yaml: text, no tool calls), where each CLI's block exits 0 with every model call
// answered; and the scripted demo (configs/agents.yaml), where each block prints the scripted closing answer, which
// it only gets after running the listing the engine asked for.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect } from "vitest";
import { namespaceTest as test } from "../helpers/network-namespace.js";
import { CLIS_DIR } from "./clis.js";
import { startNetns, type Netns } from "./netns.js";
import { REPO_ROOT } from "./rig.js";

const DOC = join(REPO_ROOT, "docs", "clients-coding-agents.md");
const CLOSING = "Done. The listing above came from a real tool call your agent ran";
/** The doc's two ways to start the demo, as its text gives them. */
const NPM_START = "npm start";
const SCRIPTED_START = "node dist/src/cli.js start --config configs/agents.yaml";

/** The doc's bash blocks: the first sets URL, M and CLIS; each further one runs a CLI. */
function bashBlocks(): string[] {
  return [...readFileSync(DOC, "utf8").matchAll(/```bash\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** The gateway's request log lines (JSON: stdout is not a terminal) for the model API. */
interface ModelCall {
  status: number;
  path: string;
}

function modelCalls(output: string): ModelCall[] {
  return output
    .split("\n")
    .filter((line) => line.startsWith("{") && line.includes('"msg":"request"'))
    .map((line) => JSON.parse(line) as ModelCall)
    .filter((line) => line.path.startsWith("/v1/"));
}

interface BlockRun {
  command: string;
  exit: { code: number | null; timedOut: boolean };
  output: string;
  /** The gateway's model calls logged by the end of the block. */
  calls: ModelCall[];
  gatewayOutput: string;
}

/** A pattern matched once the output holds `count` request log lines (a line is written once its answer ended). */
function requestLines(count: number): RegExp {
  return new RegExp(`(?:"msg":"request"[\\s\\S]*?){${count}}`);
}

/**
 * Starts the demo with `start` (bash, in the repo), runs every CLI block against it, one after the other (each
 * must exit 0, and `least` model calls are awaited in the log after it), stops it (SIGTERM: it drains, so its log
 * is whole) and checks that every model call was answered.
 */
async function runBlocks(start: string, least: number): Promise<BlockRun[]> {
  const [settings, ...commands] = bashBlocks();
  expect(settings).toContain("URL=http://127.0.0.1:8000");
  expect(commands.length).toBe(4);
  expect(readFileSync(DOC, "utf8")).toContain(`\`${start}\``);
  const ns: Netns = await startNetns();
  const home = mkdtempSync(join(tmpdir(), "agent-serve-doc-"));
  const runs: BlockRun[] = [];
  try {
    // npm's update check would look for the registry, which the namespace does not have
    const gateway = ns.spawn("bash", ["-c", `exec ${start}`], {
      cwd: REPO_ROOT,
      env: { ...process.env, npm_config_update_notifier: "false" },
      timeoutMs: 600_000,
    });
    await gateway.waitForLine(/gateway listening/);
    for (const command of commands) {
      const before = modelCalls(gateway.output()).length;
      const linesBefore = gateway.output().match(/"msg":"request"/g)?.length ?? 0;
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
      await gateway.waitForLine(requestLines(linesBefore + least));
      runs.push({
        command,
        exit,
        output: run.output(),
        calls: modelCalls(gateway.output()).slice(before),
        gatewayOutput: gateway.output(),
      });
    }
    gateway.signal("SIGTERM");
    await gateway.exited;
    // every call answered (Codex may hang up after the end event: 499)
    for (const call of modelCalls(gateway.output()))
      expect([200, 499], gateway.output()).toContain(call.status);
    return runs;
  } finally {
    await ns.close();
    rmSync(home, { recursive: true, force: true });
  }
}

// The two demos run at once, each in its own namespace (both listen on the namespace's own 127.0.0.1:8000): the
// CLIs mostly wait on their model calls, so the file takes about as long as its slower half.
describe.concurrent("the doc's command blocks", () => {
  test("every command block of docs/clients-coding-agents.md works as written against `npm start`", async () => {
    // the engines answer text, never a tool call: the CLI prints the words and stops
    for (const run of await runBlocks(NPM_START, 1)) {
      const context = `${run.command}\n${run.output}\n${run.gatewayOutput}`;
      expect(run.output.trim().length, context).toBeGreaterThan(0);
      expect(run.calls.length, context).toBeGreaterThanOrEqual(1);
    }
  }, 900_000);

  test("every command block of docs/clients-coding-agents.md works as written against the scripted demo", async () => {
    // the listing, then the closing answer: at least two model calls per CLI
    for (const run of await runBlocks(SCRIPTED_START, 2))
      expect(run.output, `${run.command}\n${run.output}\n${run.gatewayOutput}`).toContain(CLOSING);
  }, 900_000);
});
