// The coding-agent CLIs under test: how each runs headless against the gateway, and the script it is driven by.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { AGENT_KEY, AGENT_MODEL, REPO_ROOT, type AgentCommand, type ScriptToolCall } from "./rig.js";

/** The task every agent is given; the script makes the engines carry it out with three tool calls. */
export const TASK_PROMPT =
  "Create hello.txt with the text hi, read it back, then create bye.txt with the text bye.";

export interface AgentCli {
  name: string;
  /** The session signal the gateway should name as `session_source` for this CLI's calls. */
  sessionSource: string;
  /** Three tool calls (write hello.txt, read it, write bye.txt) in this CLI's own tool names. */
  script(workdir: string): ScriptToolCall[];
  /** Writes what the CLI reads from HOME and returns how to start it. */
  command(gatewayUrl: string, home: string, prompt: string): AgentCommand;
}

const bin = (path: string): string => join(REPO_ROOT, "node_modules", path);

export const claudeCode: AgentCli = {
  name: "claude-code",
  sessionSource: "header:x-claude-code-session-id",
  // Write and Read take absolute paths
  script: (workdir) => [
    { tool: "Write", arguments: { file_path: join(workdir, "hello.txt"), content: "hi" } },
    { tool: "Read", arguments: { file_path: join(workdir, "hello.txt") } },
    { tool: "Write", arguments: { file_path: join(workdir, "bye.txt"), content: "bye" } },
  ],
  command: (gatewayUrl, home, prompt) => ({
    command: process.execPath,
    // as root, --dangerously-skip-permissions is refused: the task's tools are allowed by name
    args: [
      bin("@anthropic-ai/claude-code/cli.js"),
      "-p",
      prompt,
      "--model",
      AGENT_MODEL,
      "--allowedTools",
      "Write,Read",
    ],
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
  script: () => [
    { tool: "exec_command", arguments: { cmd: "printf hi > hello.txt" } },
    { tool: "exec_command", arguments: { cmd: "cat hello.txt" } },
    { tool: "exec_command", arguments: { cmd: "printf bye > bye.txt" } },
  ],
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
  script: (workdir) => [
    { tool: "write", arguments: { filePath: join(workdir, "hello.txt"), content: "hi" } },
    { tool: "read", arguments: { filePath: join(workdir, "hello.txt") } },
    { tool: "write", arguments: { filePath: join(workdir, "bye.txt"), content: "bye" } },
  ],
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
  script: () => [
    { tool: "write", arguments: { path: "hello.txt", content: "hi" } },
    { tool: "read", arguments: { path: "hello.txt" } },
    { tool: "write", arguments: { path: "bye.txt", content: "bye" } },
  ],
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
