// Which tool types the simulator accepts, offers and refuses, as vLLM does: Responses tools (namespaces,
// hosted tools, the gpt-oss path), chat-completions tools (type defaults to function), Messages tools.
import { describe, expect, it } from "vitest";
import { parseAnthropicTools } from "../../src/surface/anthropic-tools.js";
import { SimRequestError } from "../../src/surface/errors.js";
import { parseResponsesRequest } from "../../src/sim/responses-request.js";
import { normaliseToolChoice, parseResponsesTools } from "../../src/sim/responses-tools.js";
import { parseChatTools } from "../../src/sim/tool-calls.js";
import { CODEX_TOOLS } from "../helpers/codex-request.js";

function refusal(run: () => unknown): SimRequestError {
  try {
    run();
  } catch (err) {
    if (err instanceof SimRequestError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

describe("Responses tools as vLLM reads them (non-harmony models)", () => {
  it("offers functions and a namespace's functions under flat names, and never the hosted web_search", () => {
    const tools = parseResponsesTools(CODEX_TOOLS);
    const names = tools.functions.map((fn) => fn.name);
    expect(names).toEqual([
      "exec_command",
      "write_stdin",
      "request_user_input",
      "view_image",
      "multi_agent_v1__close_agent",
      "multi_agent_v1__resume_agent",
      "multi_agent_v1__send_input",
      "multi_agent_v1__spawn_agent",
      "multi_agent_v1__wait_agent",
      "get_goal",
      "create_goal",
      "update_goal",
    ]);
    expect(tools.chatTools).toHaveLength(12);
    expect(tools.chatTools[4]).toMatchObject({
      type: "function",
      function: { type: "function", name: "multi_agent_v1__close_agent" },
    });
    expect(tools.namespaced.get("multi_agent_v1__spawn_agent")).toEqual({
      namespace: "multi_agent_v1",
      name: "spawn_agent",
    });
    expect(tools.namespaced.size).toBe(5);
  });

  it("accepts every type of the SDK's tool union, and refuses others with the validator's message", () => {
    const hosted = [
      { type: "web_search_preview" },
      { type: "file_search", vector_store_ids: ["vs_1"] },
      { type: "code_interpreter", container: { type: "auto" } },
      { type: "image_generation" },
      { type: "local_shell" },
      { type: "custom", name: "apply_patch" },
    ];
    expect(parseResponsesTools(hosted).functions).toEqual([]);
    const unknown = refusal(() =>
      parseResponsesTools([{ type: "function", name: "f" }, { type: "browser" }]),
    );
    expect(unknown.status).toBe(400);
    expect(unknown.message).toMatch(/^tools\[1\]: Input tag 'browser' found using 'type' does not match/);
    expect(refusal(() => parseResponsesTools([{ name: "f" }])).message).toBe(
      "tools[0]: Unable to extract tag using discriminator 'type'",
    );
    expect(refusal(() => parseResponsesTools([{ type: "namespace", name: "ns" }])).message).toBe(
      "tools[0].tools: Field required",
    );
  });

  it("reads a namespaced call in the history under its flat name, and a bare tool_choice name as the flat one", () => {
    const request = parseResponsesRequest({
      input: [
        { type: "message", role: "user", content: "go" },
        {
          type: "function_call",
          call_id: "call_1",
          name: "spawn_agent",
          namespace: "multi_agent_v1",
          arguments: "{}",
        },
        { type: "function_call_output", call_id: "call_1", output: "started" },
      ],
      tools: CODEX_TOOLS,
      tool_choice: { type: "function", name: "spawn_agent" },
    });
    expect(request.input[1]).toMatchObject({
      role: "assistant",
      toolCalls: [{ function: { name: "multi_agent_v1__spawn_agent" } }],
    });
    expect(request.toolChoice).toEqual({ name: "multi_agent_v1__spawn_agent" });
    // The response object echoes the tools as sent.
    expect(request.tools).toEqual(CODEX_TOOLS);
  });

  it("reads a tool output of no call (Codex's goal objective: name and namespace, no call_id) as a tool turn", () => {
    const request = parseResponsesRequest({
      input: [
        { type: "message", role: "user", content: "go" },
        {
          type: "function_call_output",
          id: "fco_1",
          name: "goal_objective",
          namespace: "agent",
          output: "ready",
        },
      ],
    });
    expect(request.input[1]).toEqual({ role: "tool", content: "ready" });
    expect(
      refusal(() =>
        parseResponsesRequest({ input: [{ type: "function_call_output", call_id: 5, output: "x" }] }),
      ).message,
    ).toBe("input[0].call_id: Input should be a valid string");
  });

  it("treats a hosted tool's tool_choice as auto, as vLLM builds no guided decoding for it", () => {
    const tools = parseResponsesTools(CODEX_TOOLS);
    expect(normaliseToolChoice({ type: "web_search_preview" }, tools)).toBe("auto");
    expect(normaliseToolChoice({ type: "function", name: "exec_command" }, tools)).toEqual({
      type: "function",
      name: "exec_command",
    });
    expect(normaliseToolChoice("required", tools)).toBe("required");
  });
});

describe("Responses tools on vLLM's harmony path (gpt-oss)", () => {
  it("refuses namespace and web_search tools as vLLM does, and accepts functions and its built-in tools", () => {
    const namespace = refusal(() => parseResponsesTools(CODEX_TOOLS, "gpt-oss"));
    expect(namespace.status).toBe(400);
    expect(namespace.message).toBe("tool type namespace not supported");
    const withoutNamespace = CODEX_TOOLS.filter((tool) => tool["type"] !== "namespace");
    expect(refusal(() => parseResponsesTools(withoutNamespace, "gpt-oss")).message).toBe(
      "tool type web_search not supported",
    );
    const accepted = parseResponsesTools(
      [
        { type: "function", name: "f" },
        { type: "web_search_preview" },
        { type: "code_interpreter", container: { type: "auto" } },
      ],
      "gpt-oss",
    );
    expect(accepted.functions.map((fn) => fn.name)).toEqual(["f"]);
  });
});

describe("chat-completions tools (vLLM's ChatCompletionToolsParam)", () => {
  it("takes a tool without a type as a function tool", () => {
    expect(parseChatTools([{ function: { name: "read", parameters: { type: "object" } } }])).toEqual([
      { name: "read", parameters: { type: "object" } },
    ]);
  });

  it("refuses other types and malformed functions", () => {
    const hosted = refusal(() => parseChatTools([{ type: "web_search" }]));
    expect(hosted.status).toBe(400);
    expect(hosted.message).toBe("tools[0].type: Input should be 'function'");
    expect(refusal(() => parseChatTools([{ type: "function" }])).message).toBe(
      "tools[0].function: Field required",
    );
    expect(refusal(() => parseChatTools([{ type: "function", function: {} }])).message).toBe(
      "tools[0].function.name: Field required",
    );
  });
});

describe("Messages tools (vLLM's AnthropicTool)", () => {
  it("accepts custom tools without a type (as Claude Code sends them)", () => {
    const tools = parseAnthropicTools([
      { name: "Read", description: "Reads a file", input_schema: { type: "object", properties: {} } },
      { name: "Glob", input_schema: { properties: { pattern: { type: "string" } } } },
    ]);
    expect(tools.map((tool) => tool.name)).toEqual(["Read", "Glob"]);
    expect(tools[1]!.parameters).toEqual({ type: "object", properties: { pattern: { type: "string" } } });
  });

  it("refuses a server tool, which has no input_schema", () => {
    const error = refusal(() =>
      parseAnthropicTools([
        { name: "Read", input_schema: { type: "object" } },
        { type: "web_search_20250305", name: "web_search", max_uses: 5 },
      ]),
    );
    expect(error.status).toBe(400);
    expect(error.message).toBe("tools.1.input_schema: Field required");
  });
});
