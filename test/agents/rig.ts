// The coding-agent rig: scripted engines and a gateway inside a loopback-only namespace, and the CLIs run there.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startNetns, type Netns, type NsExit, type NsProcess } from "./netns.js";

export const AGENT_MODEL = "sim-model";
export const AGENT_KEY = "sk-agent-test";
const CLI_TS = fileURLToPath(new URL("../../src/cli.ts", import.meta.url));
const PROXY_TS = fileURLToPath(new URL("./recording-proxy.ts", import.meta.url));
export const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));
const ENGINE_COUNT = 2;
const ENGINE_MAX_MODEL_LEN = 131_072;
/** The longest one CLI run may take: startup and four scripted turns on instant engines. */
export const AGENT_RUN_TIMEOUT_MS = 150_000;
/** The engines' and the gateway's bound: past any test's timeout (the rig's close ends them long before). */
const SERVER_TIMEOUT_MS = 600_000;

/** One scripted turn of the engines: call this tool with these arguments. */
export interface ScriptToolCall {
  tool: string;
  arguments: Record<string, unknown>;
}

/** The engines' final answer, after the scripted calls. */
export const FINAL_TEXT = "Done: hello.txt holds hi, bye.txt holds bye and notes.txt holds notes.";

/**
 * The simulator's script (docs/simulator.md, scripted mode): one conversation with no `match`, so every request of
 * the run follows it; a request's turn is the number of assistant turns it holds. Side requests that do not offer
 * the turn's tool (OpenCode's title request) get the default text.
 */
export function simScript(calls: ScriptToolCall[]): SimScriptFile {
  return {
    conversations: [taskConversation("agent-task", calls, FINAL_TEXT)],
    default: { text: "Done." },
  };
}

/** A script file as `agent-serve sim --script` reads it (src/sim/script.ts has the full schema). */
export interface SimScriptFile {
  conversations: {
    name: string;
    match?: string | { contains: string; in: "system" | "user" | "either" };
    turns: ({ call: ScriptToolCall } | { text: string })[];
  }[];
  default?: { text: string };
}

/** A conversation that makes `calls` one per turn, then answers `text`. */
export function taskConversation(
  name: string,
  calls: ScriptToolCall[],
  text: string,
): SimScriptFile["conversations"][number] {
  return { name, turns: [...calls.map((call) => ({ call })), { text }] };
}

/** A gateway request log line (the fields the tests read). */
export interface RequestLine {
  path: string;
  status: number;
  session?: string;
  sessionSource?: string;
  backend?: string;
  hit?: boolean;
  reason?: string;
  [field: string]: unknown;
}

/** A model call as an engine answered it: its body and the usage the engine reported (recording-proxy.ts). */
export interface EngineCall {
  /** The engine's index in `engineUrls` (the gateway names it `engine-<index>`). */
  engine: number;
  path: string;
  body: Record<string, unknown>;
  status: number;
  usage?: { promptTokens: number; cachedTokens: number };
}

export interface AgentRun {
  exit: NsExit;
  output: string;
  workdir: string;
}

export interface AgentCommand {
  command: string;
  args: string[];
  env: Record<string, string>;
}

export interface AgentRig {
  readonly gatewayUrl: string;
  readonly engineUrls: string[];
  /** Starts a helper process inside the namespace (e.g. a recording proxy); closed with the rig. */
  spawn(command: string, args: string[]): NsProcess;
  /** Runs a CLI inside the namespace with only the given env (plus PATH), cwd = workdir. */
  run(cmd: AgentCommand, workdir: string): Promise<AgentRun>;
  /** The model calls each engine answered so far, engine by engine, each in the order it finished. */
  engineCalls(): EngineCall[];
  /** The gateway's request lines for model calls so far (some may still wait in its log batch). */
  modelCalls(): RequestLine[];
  /** Stops the gateway (SIGTERM: it drains and writes every log line) and returns all its model calls. */
  stopGateway(): Promise<RequestLine[]>;
  /** Everything the gateway and engines printed (for failure messages). */
  logs(): string;
  close(): Promise<void>;
}

const MODEL_PATH = /^\/v1\/(messages|responses|chat\/completions)(\?|$)/;

/** The gateway config: two engines of one tier serving AGENT_MODEL. */
function gatewayConfig(engineUrls: string[]): object {
  return {
    server: { host: "127.0.0.1", port: 0 },
    backends: engineUrls.map((url, i) => ({
      id: `engine-${i}`,
      tier: "small",
      base_url: url,
      model: AGENT_MODEL,
    })),
    routing: { default_tier: "small" },
  };
}

/**
 * Starts the namespace, ENGINE_COUNT simulated engines playing `script`, and a gateway in front of them.
 */
export async function startAgentRig(script: SimScriptFile): Promise<AgentRig> {
  const root = mkdtempSync(join(tmpdir(), "agent-serve-agents-"));
  const ns: Netns = await startNetns();
  const procs: NsProcess[] = [];
  try {
    const scriptPath = join(root, "script.json");
    writeFileSync(scriptPath, JSON.stringify(script));
    const engines = await Promise.all(
      Array.from({ length: ENGINE_COUNT }, async () => {
        const proc = startEngine(ns, scriptPath);
        procs.push(proc);
        const match = await proc.waitForLine(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
        return match[1]!;
      }),
    );
    // each engine behind a recording proxy: the usage it reports for every call, read by the tests
    const recordPaths = engines.map((_, i) => join(root, `engine-${i}.jsonl`));
    const proxied = await Promise.all(
      engines.map(async (url, i) => {
        const proc = ns.spawn(process.execPath, ["--import", "tsx", PROXY_TS, url, recordPaths[i]!], {
          cwd: REPO_ROOT,
          timeoutMs: SERVER_TIMEOUT_MS,
        });
        procs.push(proc);
        return (await proc.waitForLine(/recording on (http:\S+)/))[1]!;
      }),
    );
    const configPath = join(root, "gateway.json");
    writeFileSync(configPath, JSON.stringify(gatewayConfig(proxied)));
    const gateway = ns.spawn(
      process.execPath,
      ["--import", "tsx", CLI_TS, "gateway", "--config", configPath, "--log-level", "info"],
      { cwd: REPO_ROOT, timeoutMs: SERVER_TIMEOUT_MS },
    );
    procs.push(gateway);
    const port = (await gateway.waitForLine(/gateway listening on [^\s"]*:(\d+)/))[1]!;
    return {
      gatewayUrl: `http://127.0.0.1:${port}`,
      engineUrls: engines,
      spawn(command, args) {
        const proc = ns.spawn(command, args, { cwd: REPO_ROOT, timeoutMs: SERVER_TIMEOUT_MS });
        procs.push(proc);
        return proc;
      },
      async run(cmd, workdir) {
        const proc = ns.spawn(cmd.command, cmd.args, {
          cwd: workdir,
          env: { PATH: process.env["PATH"] ?? "/usr/bin:/bin", ...cmd.env },
          timeoutMs: AGENT_RUN_TIMEOUT_MS,
        });
        procs.push(proc);
        const exit = await proc.exited;
        return { exit, output: proc.output(), workdir };
      },
      engineCalls: () =>
        recordPaths.flatMap((path, engine) =>
          existsSync(path) ? engineCallsIn(readFileSync(path, "utf8"), engine) : [],
        ),
      modelCalls: () => requestLines(gateway.stdout()).filter((line) => MODEL_PATH.test(line.path)),
      async stopGateway() {
        gateway.signal("SIGTERM");
        const exit = await gateway.exited;
        if (exit.code !== 0)
          throw new Error(`gateway exited ${exit.code ?? exit.signal}:\n${gateway.output()}`);
        return requestLines(gateway.stdout()).filter((line) => MODEL_PATH.test(line.path));
      },
      logs: () => procs.map((p) => p.output()).join("\n----\n"),
      async close() {
        await ns.close();
        rmSync(root, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await ns.close();
    rmSync(root, { recursive: true, force: true });
    throw err;
  }
}

export interface AgentDirs {
  /** The CLI's HOME: its settings, sessions and logs go there. */
  home: string;
  /** Its working directory: the task's files are written there. */
  workdir: string;
  remove(): void;
}

/** A fresh HOME and working directory for one CLI run (before the rig starts: scripts name absolute paths). */
export function makeAgentDirs(label: string): AgentDirs {
  const root = mkdtempSync(join(tmpdir(), `agent-serve-${label}-`));
  const home = join(root, "home");
  const workdir = join(root, "work");
  mkdirSync(home);
  mkdirSync(workdir);
  return { home, workdir, remove: () => rmSync(root, { recursive: true, force: true }) };
}

/** A simulated engine inside the namespace: `agent-serve sim --script` on an OS-assigned loopback port. */
function startEngine(ns: Netns, scriptPath: string): NsProcess {
  return ns.spawn(
    process.execPath,
    [
      "--import",
      "tsx",
      CLI_TS,
      "sim",
      "--host",
      "127.0.0.1",
      "--port",
      "0",
      "--profile",
      "instant",
      "--model",
      AGENT_MODEL,
      // Claude Code and OpenCode ask for max_tokens 32000 over a 26k-token prompt: a 128k context, as served
      // Qwen models have, where the instant profile's 32k would refuse them as vLLM does
      "--max-model-len",
      String(ENGINE_MAX_MODEL_LEN),
      "--script",
      scriptPath,
    ],
    { cwd: REPO_ROOT, timeoutMs: SERVER_TIMEOUT_MS },
  );
}

/** The gateway's JSON log lines whose msg is "request". */
export function requestLines(stdout: string): RequestLine[] {
  const lines: RequestLine[] = [];
  for (const text of stdout.split("\n")) {
    if (!text.startsWith("{")) continue;
    try {
      const line = JSON.parse(text) as { msg?: unknown } & RequestLine;
      if (line.msg === "request" && typeof line.path === "string") lines.push(line);
    } catch {
      // a line cut by the kept-output window
    }
  }
  return lines;
}

/** The model calls of one engine's record file. */
function engineCallsIn(text: string, engine: number): EngineCall[] {
  return text
    .split("\n")
    .filter(Boolean)
    .map((line) => ({ engine, ...(JSON.parse(line) as Omit<EngineCall, "engine">) }))
    .filter((call) => MODEL_PATH.test(call.path));
}
