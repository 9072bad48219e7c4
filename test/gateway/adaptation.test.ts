// The adaptation of tools a stock engine refuses, without HTTP: what changes in the request (and what does not),
// tool_choice and history, and how answers are restored, JSON and events split anywhere across reads.
import { describe, expect, it } from "vitest";
import { GatewayError } from "../../src/core/errors.js";
import { adaptMessagesRequest } from "../../src/gateway/adaptation/messages-tools.js";
import {
  adaptResponsesRequest,
  type AdaptationSettings,
} from "../../src/gateway/adaptation/responses-tools.js";
import { ResponsesRelay } from "../../src/gateway/responses-relay.js";
import { CODEX_TOOLS } from "../helpers/codex-request.js";

const ON: AdaptationSettings = {
  flattenNamespaces: true,
  dropHostedTools: true,
  foldSystemMessages: true,
  dropBillingHeader: true,
};

function adapt(body: Record<string, unknown>, settings: AdaptationSettings = ON) {
  return adaptResponsesRequest(body, settings);
}

function names(tools: unknown): string[] {
  return (tools as { type: string; name?: string }[]).map((tool) => tool.name ?? tool.type);
}

describe("adaptResponsesRequest", () => {
  it("changes nothing when every tool is a function, or there are no tools", () => {
    const functions = CODEX_TOOLS.filter((tool) => tool["type"] === "function");
    expect(adapt({ input: "x", tools: functions })).toBeUndefined();
    expect(adapt({ input: "x" })).toBeUndefined();
    expect(
      adapt({ input: "x", tools: CODEX_TOOLS }, { ...ON, flattenNamespaces: false, dropHostedTools: false }),
    ).toBe(undefined);
  });

  it("flattens the namespace in place and drops web_search, keeping the client's body intact", () => {
    const body = { model: "m", input: "x", tools: CODEX_TOOLS, store: false };
    const adapted = adapt(body)!;
    expect(adapted.changes).toEqual(["flatten_namespace:multi_agent_v1", "drop_tool:web_search"]);
    expect(names(adapted.body["tools"])).toEqual([
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
    expect(adapted.body).toMatchObject({ model: "m", input: "x", store: false });
    expect(body.tools).toBe(CODEX_TOOLS);
    expect(names(CODEX_TOOLS)).toContain("multi_agent_v1");
  });

  it("applies each adaptation alone", () => {
    const flatOnly = adapt({ input: "x", tools: CODEX_TOOLS }, { ...ON, dropHostedTools: false })!;
    expect(flatOnly.changes).toEqual(["flatten_namespace:multi_agent_v1"]);
    expect(names(flatOnly.body["tools"])).toContain("web_search");
    const dropOnly = adapt(
      { input: "x", tools: CODEX_TOOLS },
      { flattenNamespaces: false, dropHostedTools: true, foldSystemMessages: true, dropBillingHeader: true },
    )!;
    expect(dropOnly.changes).toEqual(["drop_tool:web_search"]);
    expect(names(dropOnly.body["tools"])).toContain("multi_agent_v1");
  });

  it("keeps client-run tool types (custom, local_shell, ...) for the engine to judge", () => {
    const tools = [{ type: "custom", name: "apply_patch" }, { type: "local_shell" }, { type: "file_search" }];
    const adapted = adapt({ input: "x", tools })!;
    expect(names(adapted.body["tools"])).toEqual(["apply_patch", "local_shell"]);
    expect(adapted.changes).toEqual(["drop_tool:file_search"]);
  });

  it("points tool_choice at what the engine is offered", () => {
    const choice = (toolChoice: unknown) =>
      adapt({ input: "x", tools: CODEX_TOOLS, tool_choice: toolChoice })!;
    expect(choice({ type: "web_search" }).body["tool_choice"]).toBe("auto");
    expect(choice({ type: "web_search" }).changes).toContain("tool_choice:auto");
    expect(choice({ type: "function", name: "spawn_agent" }).body["tool_choice"]).toEqual({
      type: "function",
      name: "multi_agent_v1__spawn_agent",
    });
    expect(
      choice({ type: "function", name: "wait_agent", namespace: "multi_agent_v1" }).body["tool_choice"],
    ).toEqual({ type: "function", name: "multi_agent_v1__wait_agent" });
    expect(choice({ type: "function", name: "exec_command" }).body["tool_choice"]).toEqual({
      type: "function",
      name: "exec_command",
    });
    expect(choice("required").body["tool_choice"]).toBe("required");
    const allowed = choice({
      type: "allowed_tools",
      mode: "required",
      tools: [
        { type: "function", name: "close_agent" },
        { type: "web_search" },
        { type: "function", name: "get_goal" },
      ],
    });
    expect(allowed.body["tool_choice"]).toEqual({
      type: "allowed_tools",
      mode: "required",
      tools: [
        { type: "function", name: "multi_agent_v1__close_agent" },
        { type: "function", name: "get_goal" },
      ],
    });
  });

  it("flattens the namespaced calls of the history, and only those", () => {
    const input = [
      { type: "message", role: "user", content: "go" },
      {
        type: "function_call",
        call_id: "c1",
        name: "spawn_agent",
        namespace: "multi_agent_v1",
        arguments: "{}",
      },
      { type: "function_call_output", call_id: "c1", output: "ok" },
      { type: "function_call", call_id: "c2", name: "exec_command", arguments: "{}" },
    ];
    const adapted = adapt({ input, tools: CODEX_TOOLS })!;
    const out = adapted.body["input"] as Record<string, unknown>[];
    expect(out[1]).toEqual({
      type: "function_call",
      call_id: "c1",
      name: "multi_agent_v1__spawn_agent",
      arguments: "{}",
    });
    expect(out[0]).toBe(input[0]);
    expect(out[3]).toBe(input[3]);
    expect(input[1]).toHaveProperty("namespace", "multi_agent_v1");
  });

  it("refuses a namespace whose flat name another tool already has", () => {
    const tools = [
      { type: "function", name: "ns__f" },
      { type: "namespace", name: "ns", tools: [{ type: "function", name: "f" }] },
    ];
    let error: unknown;
    try {
      adapt({ input: "x", tools });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(GatewayError);
    expect((error as GatewayError).status).toBe(400);
    expect((error as GatewayError).message).toMatch(/'ns__f', a name another tool already has/);
  });
});

describe("restoring the engine's answers", () => {
  const adapted = adapt({ input: "x", tools: CODEX_TOOLS, tool_choice: "auto" })!;
  const call = {
    id: "fc_1",
    type: "function_call",
    call_id: "call_1",
    name: "multi_agent_v1__spawn_agent",
    arguments: '{"message": "list the files"}',
    status: "completed",
  };
  const engineResponse = {
    id: "resp_1",
    object: "response",
    output: [
      { id: "msg_1", type: "message", content: [{ type: "output_text", text: 'see foo.delta" here' }] },
      call,
    ],
    tools: adapted.body["tools"],
    tool_choice: "auto",
    usage: { input_tokens: 10, output_tokens: 5 },
  };

  it("names the calls of a JSON answer as the client did and echoes its own tools", () => {
    const restored = JSON.parse(
      adapted.restorer.body(Buffer.from(JSON.stringify(engineResponse))).toString(),
    ) as {
      output: Record<string, unknown>[];
      tools: unknown;
    };
    expect(restored.output[1]).toEqual({ ...call, name: "spawn_agent", namespace: "multi_agent_v1" });
    expect(restored.output[0]).toEqual(engineResponse.output[0]);
    expect(restored.tools).toEqual(CODEX_TOOLS);
    expect(adapted.restorer.body(Buffer.from("not json")).toString()).toBe("not json");
  });

  it("relays a stream with the same result however the engine's bytes are split", () => {
    const event = (type: string, data: Record<string, unknown>) =>
      `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    const open = { ...call, arguments: "", status: "in_progress" };
    const stream =
      event("response.created", { response: { ...engineResponse, output: [], status: "in_progress" } }) +
      event("response.output_text.delta", { item_id: "msg_1", delta: '"function_call' }) +
      event("response.output_item.added", { output_index: 1, item: open }) +
      event("response.function_call_arguments.delta", { item_id: "fc_1", delta: call.arguments }) +
      event("response.function_call_arguments.done", {
        item_id: "fc_1",
        name: call.name,
        arguments: call.arguments,
      }) +
      event("response.output_item.done", { output_index: 1, item: call }) +
      event("response.completed", { response: engineResponse });
    const bytes = Buffer.from(stream);
    const relayed = (splits: number[]): string => {
      const relay = new ResponsesRelay(Buffer.from(',"x_agent_serve":{"adapted":["x"]}'), adapted.restorer);
      const out: Buffer[] = [];
      let from = 0;
      for (const at of [...splits, bytes.length]) {
        out.push(...relay.push(bytes.subarray(from, at)));
        from = at;
      }
      out.push(...relay.flush());
      expect(relay.complete).toBe(true);
      expect(relay.usage).toMatchObject({ promptTokens: 10 });
      return Buffer.concat(out).toString();
    };
    const whole = relayed([]);
    expect(whole).not.toContain("multi_agent_v1__");
    const events = whole
      .split("\n\n")
      .filter((part) => part.length > 0)
      .map((part) => JSON.parse(part.slice(part.indexOf("data: ") + 6)) as Record<string, unknown>);
    expect(events.map((e) => e["type"])).toEqual([
      "response.created",
      "response.output_text.delta",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events[1]!["delta"]).toBe('"function_call');
    expect(events[2]!["item"]).toMatchObject({ name: "spawn_agent", namespace: "multi_agent_v1" });
    expect(events[4]!["name"]).toBe("spawn_agent");
    expect(events[5]!["item"]).toMatchObject({ name: "spawn_agent", namespace: "multi_agent_v1" });
    expect(events[6]).toMatchObject({
      response: { output: [{}, { name: "spawn_agent", namespace: "multi_agent_v1" }], tools: CODEX_TOOLS },
      x_agent_serve: { adapted: ["x"] },
    });
    for (let at = 1; at < bytes.length; at += 13) expect(relayed([at])).toBe(whole);
    for (let at = 3; at < bytes.length; at += 97) expect(relayed([at, at + 1, at + 40])).toBe(whole);
  });
});

describe("adaptMessagesRequest", () => {
  const custom = {
    name: "Read",
    description: "Reads a file",
    input_schema: { type: "object", properties: {} },
  };
  const search = { type: "web_search_20250305", name: "web_search", max_uses: 5 };

  it("leaves custom tools alone and drops server tools", () => {
    expect(adaptMessagesRequest({ messages: [], tools: [custom] }, ON)).toBeUndefined();
    const adapted = adaptMessagesRequest(
      { messages: [], tools: [custom, search], tool_choice: { type: "tool", name: "web_search" } },
      ON,
    )!;
    expect(adapted.body["tools"]).toEqual([custom]);
    expect(adapted.body["tool_choice"]).toEqual({ type: "auto" });
    expect(adapted.changes).toEqual(["drop_tool:web_search_20250305", "tool_choice:auto"]);
  });

  it("does nothing when drop_hosted_tools is off", () => {
    const off = { ...ON, dropHostedTools: false };
    expect(adaptMessagesRequest({ messages: [], tools: [custom, search] }, off)).toBeUndefined();
  });
});
