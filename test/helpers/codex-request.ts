// Test fixture: a request shaped as Codex CLI 0.169.0 sends it (custom provider, wire_api "responses"), from a
// recording of its first request: the same headers, fields, tool names, types and parameter schemas (texts
// shortened and reworded), including its `namespace` tool (tools[4]) and its `web_search` tool (tools[8]).

/** Codex's headers: the session id three times over (session-id, thread-id, x-client-request-id). */
export function codexHeaders(sessionId: string): Record<string, string> {
  return {
    "content-type": "application/json",
    accept: "text/event-stream",
    "session-id": sessionId,
    "thread-id": sessionId,
    "x-client-request-id": sessionId,
    "x-codex-window-id": `${sessionId}:0`,
    originator: "codex_exec",
    "user-agent": "codex_exec/0.169.0 (Debian 12.0.0; x86_64) xterm (codex_exec; 0.169.0)",
  };
}

const noExtra = { additionalProperties: false } as const;

function fn(name: string, description: string, properties: Record<string, unknown>, required: string[]) {
  return {
    type: "function",
    name,
    description,
    strict: false,
    parameters: { type: "object", properties, required, ...noExtra },
  };
}

const inputItems = {
  type: "array",
  items: {
    type: "object",
    properties: {
      type: { type: "string" },
      text: { type: "string" },
      path: { type: "string" },
      name: { type: "string" },
      image_url: { type: "string" },
      audio_url: { type: "string" },
    },
    ...noExtra,
  },
};

/** Codex's 9 tools, in its order. */
export const CODEX_TOOLS: readonly Record<string, unknown>[] = [
  fn(
    "exec_command",
    "Runs a command in a PTY, returning output or a session id for ongoing interaction.",
    {
      cmd: { type: "string" },
      justification: { type: "string" },
      login: { type: "boolean" },
      max_output_tokens: { type: "number" },
      prefix_rule: { type: "array", items: { type: "string" } },
      sandbox_permissions: { type: "string", enum: ["use_default", "require_escalated"] },
      shell: { type: "string" },
      tty: { type: "boolean" },
      workdir: { type: "string" },
      yield_time_ms: { type: "number" },
    },
    ["cmd"],
  ),
  fn(
    "write_stdin",
    "Writes characters to an existing exec session and returns recent output.",
    {
      chars: { type: "string" },
      max_output_tokens: { type: "number" },
      session_id: { type: "number" },
      yield_time_ms: { type: "number" },
    },
    ["session_id"],
  ),
  fn(
    "request_user_input",
    "Asks the user one to three short questions and waits for the answers.",
    {
      questions: {
        type: "array",
        items: {
          type: "object",
          properties: {
            header: { type: "string" },
            id: { type: "string" },
            question: { type: "string" },
            options: {
              type: "array",
              items: {
                type: "object",
                properties: { label: { type: "string" }, description: { type: "string" } },
                required: ["label", "description"],
                ...noExtra,
              },
            },
          },
          required: ["id", "header", "question", "options"],
          ...noExtra,
        },
      },
    },
    ["questions"],
  ),
  fn("view_image", "Shows a local image to the model.", { path: { type: "string" } }, ["path"]),
  {
    type: "namespace",
    name: "multi_agent_v1",
    description: "Tools for spawning and managing sub-agents.",
    tools: [
      fn("close_agent", "Closes an agent.", { target: { type: "string" } }, ["target"]),
      fn("resume_agent", "Resumes a closed agent.", { id: { type: "string" } }, ["id"]),
      fn(
        "send_input",
        "Sends a message to an agent.",
        {
          interrupt: { type: "boolean" },
          items: inputItems,
          message: { type: "string" },
          target: { type: "string" },
        },
        ["target"],
      ),
      fn(
        "spawn_agent",
        "Starts a sub-agent on a task.",
        {
          fork_context: { type: "boolean" },
          items: inputItems,
          message: { type: "string" },
          model: { type: "string" },
          reasoning_effort: { type: "string" },
        },
        [],
      ),
      fn(
        "wait_agent",
        "Waits for agents to finish.",
        { targets: { type: "array", items: { type: "string" } }, timeout_ms: { type: "number" } },
        ["targets"],
      ),
    ],
  },
  fn("get_goal", "Reads the current goal.", {}, []),
  fn("create_goal", "Starts a goal.", { objective: { type: "string" }, token_budget: { type: "integer" } }, [
    "objective",
  ]),
  fn(
    "update_goal",
    "Marks the goal complete, blocked or paused.",
    { status: { type: "string", enum: ["complete", "blocked", "paused"] } },
    ["status"],
  ),
  { type: "web_search", external_web_access: false },
];

/** The system prompt stand-in: Codex sends about 17 KB of developer text; this keeps its place and some bulk. */
const DEVELOPER_TEXT =
  "You are a coding agent running in a terminal. Read files, run commands and edit code to finish the task. ".repeat(
    20,
  );

function message(id: string, role: "developer" | "user", text: string) {
  return { type: "message", id, role, content: [{ type: "input_text", text }] };
}

/** The first request's body; `history` continues it (Codex sends the whole conversation every turn). */
export function codexRequestBody(
  model: string,
  sessionId: string,
  options: { stream?: boolean; history?: readonly unknown[] } = {},
): Record<string, unknown> {
  return {
    model,
    input: [
      message("msg_dev_0", "developer", DEVELOPER_TEXT),
      message(
        "msg_dev_1",
        "developer",
        "<permissions instructions>read-only sandbox</permissions instructions>",
      ),
      message(
        "msg_env",
        "user",
        "<environment_context>\n  <cwd>/work</cwd>\n  <shell>bash</shell>\n</environment_context>",
      ),
      message("msg_task", "user", "Start a helper agent to list the files, then report."),
      ...(options.history ?? []),
    ],
    tools: CODEX_TOOLS,
    tool_choice: "auto",
    parallel_tool_calls: true,
    reasoning: { summary: "auto" },
    store: false,
    stream: options.stream ?? true,
    include: ["reasoning.encrypted_content"],
    prompt_cache_key: sessionId,
    client_metadata: { session_id: sessionId, thread_id: sessionId, turn_id: `${sessionId}-turn` },
  };
}
