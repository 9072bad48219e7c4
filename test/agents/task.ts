// The shared check of the agent tests: a CLI carries out the scripted task through the gateway, on one engine.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { expect } from "vitest";
import { TASK_FILES, TASK_PROMPT, type AgentCli } from "./clis.js";
import {
  makeAgentDirs,
  simScript,
  startAgentRig,
  type AgentRig,
  type AgentRun,
  type EngineCall,
  type RequestLine,
} from "./rig.js";

/** Tool calls of the scripted task, and so the least number of model calls of a run (one more: the answer). */
export const TASK_TOOL_CALLS = TASK_FILES.length * 2;
/** The share of its prompt every model call after a thread's first must read from the engine's cache. */
export const MIN_CACHED_SHARE = 0.95;

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
    const calls = [...sessions.values()][0]!;
    expectOneEngine(cli, calls, rig);
    expectCached(calls, rig);
  } finally {
    await rig?.close();
    dirs.remove();
  }
}

/** The CLI exited 0 and its tool calls really ran: every file holds what the script wrote. */
export function expectFinished(run: AgentRun, rig: AgentRig, files = TASK_FILES): void {
  expect(run.exit, `${run.output}\n${describe(rig)}`).toMatchObject({ code: 0, timedOut: false });
  for (const file of files) expect(readFileSync(join(run.workdir, file.name), "utf8")).toBe(file.text);
}

/**
 * One session's calls: at least seven (six tool calls, each answered before the next step, then the text),
 * all answered, all on one engine, hits after the first, named by the client's own signal.
 */
export function expectOneEngine(
  cli: AgentCli,
  calls: RequestLine[],
  rig: AgentRig,
  least = TASK_TOOL_CALLS + 1,
): void {
  const context = describe(rig);
  expect(calls.length, context).toBeGreaterThanOrEqual(least);
  const answered = cli.hangsUpAfterCompleted === true ? [200, 499] : [200];
  for (const call of calls) expect(answered, context).toContain(call.status);
  expect(new Set(calls.map((c) => c.backend)).size, context).toBe(1);
  expect(
    calls.slice(1).map((c) => c.hit),
    context,
  ).toEqual(calls.slice(1).map(() => true));
  expect(new Set(calls.map((c) => c.sessionSource)), context).toEqual(new Set([cli.sessionSource]));
}

/**
 * Every call of the task's thread after its first read at least MIN_CACHED_SHARE of its prompt from the engine's
 * cache: by the usage the engine reported (the calls offering tools; side requests such as OpenCode's title have
 * none), and by the gateway's receipts (the same cached counts, nothing lost).
 */
export function expectCached(calls: RequestLine[], rig: AgentRig): void {
  const context = describe(rig);
  const backend = calls[0]!.backend;
  const thread = rig.engineCalls().filter((call) => `engine-${call.engine}` === backend && offersTools(call));
  expect(thread.length, context).toBeGreaterThanOrEqual(TASK_TOOL_CALLS + 1);
  const shares = thread.slice(1).map((call) => cachedShare(call));
  expect(Math.min(...shares), `${JSON.stringify(shares)}\n${context}`).toBeGreaterThanOrEqual(
    MIN_CACHED_SHARE,
  );
  // a thread's first call has nothing to reuse (new_session; conversation_changed after a side request of the
  // same session, such as OpenCode's title); every later one loses nothing
  for (const call of calls) expect(call.lost, context).toBe(0);
  const continued = calls.filter((call) => call.lostCause === "none");
  expect(continued.length, context).toBeGreaterThanOrEqual(TASK_TOOL_CALLS);
  const engineCached = new Set(thread.slice(1).map((call) => call.usage?.cachedTokens));
  for (const call of continued) expect(engineCached.has(call.cached as number), context).toBe(true);
}

function offersTools(call: EngineCall): boolean {
  const tools = call.body["tools"];
  return Array.isArray(tools) && tools.length > 0;
}

function cachedShare(call: EngineCall): number {
  if (call.usage === undefined) return 0;
  return call.usage.cachedTokens / call.usage.promptTokens;
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
  const usage = rig
    .engineCalls()
    .map((c) => `engine-${c.engine} ${c.path} ${c.status} ${JSON.stringify(c.usage)}`);
  return (
    `gateway model calls:\n${calls.join("\n")}\n\nengine usage:\n${usage.join("\n")}\n\n` +
    `rig output:\n${rig.logs().slice(-20_000)}`
  );
}
