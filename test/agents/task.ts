// The shared check of the agent tests: a CLI carries out the scripted task through the gateway, on one engine.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import { TASK_PROMPT, type AgentCli } from "./clis.js";
import {
  makeAgentDirs,
  simScript,
  startAgentRig,
  type AgentRig,
  type AgentRun,
  type RequestLine,
} from "./rig.js";

/** Generous: startup of the engines, the gateway and the CLI, four turns each. Children have their own timeouts. */
export const AGENT_TEST_TIMEOUT_MS = 300_000;

/** Runs `cli` on TASK_PROMPT against a fresh rig and checks the run, the files and where its calls went. */
export async function checkAgentTask(cli: AgentCli): Promise<void> {
  const dirs = makeAgentDirs(cli.name);
  let rig: AgentRig | undefined;
  try {
    rig = await startAgentRig(simScript(cli.script(dirs.workdir)));
    const run = await rig.run(cli.command(rig.gatewayUrl, dirs.home, TASK_PROMPT), dirs.workdir);
    expectFinished(run, rig);
    const sessions = sessionsOf(await rig.stopGateway());
    expect([...sessions.keys()], describe(rig)).toHaveLength(1);
    expectOneEngine(cli, [...sessions.values()][0]!, rig);
  } finally {
    await rig?.close();
    dirs.remove();
  }
}

/** The CLI exited 0 and its tool calls really ran: both files hold what the script wrote. */
export function expectFinished(run: AgentRun, rig: AgentRig): void {
  expect(run.exit, `${run.output}\n${describe(rig)}`).toMatchObject({ code: 0, timedOut: false });
  expect(readFileSync(join(run.workdir, "hello.txt"), "utf8")).toBe("hi");
  expect(readFileSync(join(run.workdir, "bye.txt"), "utf8")).toBe("bye");
}

/**
 * One session's calls: at least four (three tool calls, each answered before the next step, then the text),
 * all answered, all on one engine, hits after the first, named by the client's own signal.
 */
export function expectOneEngine(cli: AgentCli, calls: RequestLine[], rig: AgentRig): void {
  const context = describe(rig);
  expect(calls.length, context).toBeGreaterThanOrEqual(4);
  expect(
    calls.map((c) => c.status),
    context,
  ).toEqual(calls.map(() => 200));
  expect(new Set(calls.map((c) => c.backend)).size, context).toBe(1);
  expect(
    calls.slice(1).map((c) => c.hit),
    context,
  ).toEqual(calls.slice(1).map(() => true));
  expect(new Set(calls.map((c) => c.sessionSource)), context).toEqual(new Set([cli.sessionSource]));
}

/** Model calls grouped by the session the gateway named. */
export function sessionsOf(calls: RequestLine[]): Map<string, RequestLine[]> {
  const sessions = new Map<string, RequestLine[]>();
  for (const call of calls) {
    const key = call.session ?? "(none)";
    sessions.set(key, [...(sessions.get(key) ?? []), call]);
  }
  return sessions;
}

export function describe(rig: AgentRig): string {
  const calls = rig.modelCalls().map((c) => JSON.stringify(c));
  return `gateway model calls:\n${calls.join("\n")}\n\nrig output:\n${rig.logs().slice(-20_000)}`;
}
