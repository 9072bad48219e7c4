// The coding-agent CLIs under test: how each runs headless against the gateway, and the script it is driven by.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  AGENT_KEY,
  AGENT_MODEL,
  FINAL_TEXT,
  REPO_ROOT,
  taskConversation,
  type AgentCommand,
  type ScriptToolCall,
  type SimScriptFile,
} from "./rig.js";

/** The task every agent is given; the script makes the engines carry it out with six tool calls. */
export const TASK_PROMPT =
  "Create hello.txt with the text hi and read it back, create bye.txt with the text bye and read it back, " +
  "then create notes.txt with the text notes and read it back.";

/** The files the task writes, and what each holds. */
export const TASK_FILES: readonly { name: string; text: string }[] = [
  { name: "hello.txt", text: "hi" },
  { name: "bye.txt", text: "bye" },
  { name: "notes.txt", text: "notes" },
];

/** The task's six calls: for each file, a write, then a read, in a CLI's own tool names and arguments. */
function writeAndRead(
  write: (name: string, text: string) => ScriptToolCall,
  read: (name: string) => ScriptToolCall,
): ScriptToolCall[] {
  return TASK_FILES.flatMap((file) => [write(file.name, file.text), read(file.name)]);
}

export interface AgentCli {
  name: string;
  /** The session signal the gateway should name as `session_source` for this CLI's calls. */
  sessionSource: string;
  /**
   * The CLI hangs up once it has read the stream's completed event, before the gateway's last bytes (the
   * x_agent_serve event after it), so a whole answer may be logged 499: Codex does.
   */
  hangsUpAfterCompleted?: boolean;
  /** The task's six tool calls (write and read back each of TASK_FILES) in this CLI's own tool names. */
  script(workdir: string): ScriptToolCall[];
  /** Writes what the CLI reads from HOME and returns how to start it. */
  command(gatewayUrl: string, home: string, prompt: string): AgentCommand;
}

/**
 * Where the CLIs are installed: test/agents/node_modules (the pins of test/agents/package.json, which .ci/run
 * installs), or AGENT_CLIS_DIR (`npm run agents:latest` points it at the newest releases in a temporary dir).
 */
export const CLIS_DIR = process.env["AGENT_CLIS_DIR"] ?? join(REPO_ROOT, "test", "agents", "node_modules");
const bin = (path: string): string => join(CLIS_DIR, path);

export const claudeCode: AgentCli = {
  name: "claude-code",
  sessionSource: "header:x-claude-code-session-id",
  // Write and Read take absolute paths
  script: (workdir) =>
    writeAndRead(
      (name, text) => ({ tool: "Write", arguments: { file_path: join(workdir, name), content: text } }),
      (name) => ({ tool: "Read", arguments: { file_path: join(workdir, name) } }),
    ),
  command: (gatewayUrl, home, prompt) => ({
    // the platform package's native binary (the main package's postinstall only links it into bin/)
    command: bin("@anthropic-ai/claude-code-linux-x64/claude"),
    // as root, --dangerously-skip-permissions is refused: the task's tools are allowed by name
    args: ["-p", prompt, "--model", AGENT_MODEL, "--allowedTools", "Write,Read"],
    env: {
      HOME: home,
      ANTHROPIC_BASE_URL: gatewayUrl,
      ANTHROPIC_API_KEY: AGENT_KEY,
      DISABLE_TELEMETRY: "1",
      DISABLE_AUTOUPDATER: "1",
      DISABLE_ERROR_REPORTING: "1",
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    },
  }),
};

export const codex: AgentCli = {
  name: "codex",
  sessionSource: "header:session-id",
  hangsUpAfterCompleted: true,
  script: () =>
    writeAndRead(
      (name, text) => ({ tool: "exec_command", arguments: { cmd: `printf ${text} > ${name}` } }),
      (name) => ({ tool: "exec_command", arguments: { cmd: `cat ${name}` } }),
    ),
  command: (gatewayUrl, home, prompt) => ({
    command: process.execPath,
    args: [
      bin("@openai/codex/bin/codex.js"),
      "exec",
      "--skip-git-repo-check",
      // the test's namespace is the sandbox; Codex's own needs privileges a CI container may not grant
      "--dangerously-bypass-approvals-and-sandbox",
      "-m",
      AGENT_MODEL,
      "-c",
      "model_provider=agentserve",
      "-c",
      `model_providers.agentserve={name="agent-serve",base_url="${gatewayUrl}/v1",env_key="AGENT_SERVE_KEY",wire_api="responses"}`,
      "-c",
      "check_for_update_on_startup=false",
      "-c",
      "analytics.enabled=false",
      prompt,
    ],
    env: { HOME: home, CODEX_HOME: home, AGENT_SERVE_KEY: AGENT_KEY },
  }),
};

export const openCode: AgentCli = {
  name: "opencode",
  sessionSource: "header:x-session-id",
  // write and read take absolute paths
  script: (workdir) =>
    writeAndRead(
      (name, text) => ({ tool: "write", arguments: { filePath: join(workdir, name), content: text } }),
      (name) => ({ tool: "read", arguments: { filePath: join(workdir, name) } }),
    ),
  command: (gatewayUrl, home, prompt) => ({
    // the platform package's binary: opencode-ai's postinstall only copies it (npm 11 runs no install scripts)
    command: bin("opencode-linux-x64/bin/opencode"),
    args: ["run", prompt],
    env: {
      HOME: home,
      OPENCODE_CONFIG_CONTENT: JSON.stringify({
        provider: {
          agentserve: {
            npm: "@ai-sdk/openai-compatible",
            name: "agent-serve",
            options: { baseURL: `${gatewayUrl}/v1`, apiKey: AGENT_KEY },
            models: { [AGENT_MODEL]: {} },
          },
        },
        model: `agentserve/${AGENT_MODEL}`,
      }),
      OPENCODE_DISABLE_AUTOUPDATE: "1",
      OPENCODE_DISABLE_MODELS_FETCH: "1",
      OPENCODE_DISABLE_SHARE: "1",
      OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
    },
  }),
};

export const pi: AgentCli = {
  name: "pi",
  sessionSource: "header:session_id",
  script: () =>
    writeAndRead(
      (name, text) => ({ tool: "write", arguments: { path: name, content: text } }),
      (name) => ({ tool: "read", arguments: { path: name } }),
    ),
  command: (gatewayUrl, home, prompt) => {
    const dir = join(home, ".pi", "agent");
    mkdirSync(dir, { recursive: true });
    // the Responses API: with openai-completions pi sends no session signal at all
    const models = {
      providers: {
        agentserve: {
          baseUrl: `${gatewayUrl}/v1`,
          api: "openai-responses",
          apiKey: AGENT_KEY,
          models: [{ id: AGENT_MODEL }],
        },
      },
    };
    writeFileSync(join(dir, "models.json"), JSON.stringify(models));
    return {
      command: process.execPath,
      args: [
        bin("@mariozechner/pi-coding-agent/dist/cli.js"),
        "--provider",
        "agentserve",
        "--model",
        AGENT_MODEL,
        "-p",
        prompt,
      ],
      env: { HOME: home, PI_OFFLINE: "1", PI_TELEMETRY: "0", PI_SKIP_VERSION_CHECK: "1" },
    };
  },
};

/** Every CLI under test, by name. */
export const AGENT_CLIS: readonly AgentCli[] = [claudeCode, codex, openCode, pi];

/** The sub-agent's task: its first user turn, which the script matches to give it its own turns. */
const SUBTASK = "Sub-task: create bye.txt with the text bye.";

/** Claude Code writes hello.txt, reads it, and hands bye.txt to an Agent sub-agent (sub-agents.test.ts). */
export function subAgentScript(workdir: string): SimScriptFile {
  const hello = join(workdir, "hello.txt");
  return {
    conversations: [
      {
        name: "sub-agent",
        match: { contains: SUBTASK, in: "user" },
        turns: [
          {
            call: {
              tool: "Write",
              arguments: { file_path: join(workdir, "bye.txt"), content: "bye" },
            },
          },
          { text: "bye.txt is written." },
        ],
      },
      taskConversation(
        "parent",
        [
          { tool: "Write", arguments: { file_path: hello, content: "hi" } },
          { tool: "Read", arguments: { file_path: hello } },
          {
            tool: "Agent",
            arguments: {
              description: "Write bye.txt",
              prompt: SUBTASK,
              subagent_type: "general-purpose",
            },
          },
        ],
        FINAL_TEXT,
      ),
    ],
    default: { text: "Done." },
  };
}
