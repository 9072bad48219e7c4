// Codex CLI's request through the gateway to an engine that refuses its namespace and web_search tools (the
// simulator following vLLM's gpt-oss path): adapted by default (the engine sees plain functions, the client gets
// its namespaced calls back, JSON and streamed), and with each adaptation turned off the engine's 400 reaches
// the client. A recording relay in front of the engine shows what it received and sent.
import OpenAI from "openai";
import type { Response, ResponseFunctionToolCall } from "openai/resources/responses/responses";
import { afterEach, describe, expect, it } from "vitest";
import { startSimEngine, type SimEngineHandle, type SimEngineOptions } from "../../src/sim/index.js";
import type { Exchange } from "../clients/tap.js";
import { startTappedGateway } from "../helpers/tapped-gateway.js";
import { CODEX_TOOLS, codexHeaders, codexRequestBody } from "../helpers/codex-request.js";

const MODEL = "sim-small";
const SESSION = "01a23f2c-7d67-7781-9625-7dc9d2c9f0e9";
const NAMESPACED = new Set(["close_agent", "resume_agent", "send_input", "spawn_agent", "wait_agent"]);
/** A model that always calls one of the namespace's functions: only those are offered besides web_search. */
const NAMESPACE_AND_SEARCH = CODEX_TOOLS.filter((tool) => tool["type"] !== "function");

interface Rig {
  url: string;
  log: Exchange[];
  close(): Promise<void>;
}

let rig: Rig | undefined;
afterEach(async () => {
  await rig?.close();
  rig = undefined;
});

async function startRig(
  adaptation?: Record<string, boolean>,
  sim: Partial<SimEngineOptions> = {},
): Promise<Rig> {
  const log: Exchange[] = [];
  const engine: SimEngineHandle = await startSimEngine({
    profile: "instant",
    model: MODEL,
    seed: 5,
    toolTypes: "gpt-oss",
    ...sim,
  });
  try {
    const gateway = await startTappedGateway(engine, MODEL, log, adaptation);
    return { url: gateway.url, log, close: () => gateway.close() };
  } catch (err) {
    await engine.close();
    throw err;
  }
}

function post(url: string, body: Record<string, unknown>): Promise<globalThis.Response> {
  return fetch(`${url}/v1/responses`, {
    method: "POST",
    headers: codexHeaders(SESSION),
    body: JSON.stringify(body),
  });
}

interface EngineTool {
  type: string;
  name?: string;
}

/** What the engine received in the last exchange. */
function engineRequest(log: readonly Exchange[]): {
  tools: EngineTool[];
  input: unknown[];
  tool_choice?: unknown;
} {
  return JSON.parse(log.at(-1)!.requestBody) as { tools: EngineTool[]; input: unknown[] };
}

describe("Codex's tools through the gateway, adapted by default", () => {
  it("sends the engine plain functions, and gives the client its namespaced call, its tools and the changes", async () => {
    rig = await startRig();
    const body = codexRequestBody(MODEL, SESSION, { stream: false });
    body["tools"] = NAMESPACE_AND_SEARCH;
    const answer = await post(rig.url, body);
    expect(answer.status).toBe(200);
    const json = (await answer.json()) as Response & { x_agent_serve: { adapted: string[] } };

    const sent = engineRequest(rig.log);
    expect(sent.tools.map((tool) => [tool.type, tool.name])).toEqual(
      [...NAMESPACED].map((name) => ["function", `multi_agent_v1__${name}`]),
    );
    const engineAnswer = JSON.parse(rig.log.at(-1)!.responseBody) as Response;
    const engineCall = engineAnswer.output.find(
      (item) => item.type === "function_call",
    ) as ResponseFunctionToolCall;
    expect(engineCall.name).toMatch(/^multi_agent_v1__/);

    const call = json.output.find((item) => item.type === "function_call") as ResponseFunctionToolCall;
    expect(call).toMatchObject({
      namespace: "multi_agent_v1",
      name: engineCall.name.slice("multi_agent_v1__".length),
      call_id: engineCall.call_id,
      arguments: engineCall.arguments,
    });
    expect(NAMESPACED.has(call.name)).toBe(true);
    expect(json.tools).toEqual(NAMESPACE_AND_SEARCH);
    expect(json.x_agent_serve.adapted).toEqual(["flatten_namespace:multi_agent_v1", "drop_tool:web_search"]);
    expect(answer.headers.get("x-agent-serve-adapted")).toBe(
      "flatten_namespace:multi_agent_v1,drop_tool:web_search",
    );
  });

  it("streams the call back namespaced, as the openai SDK parses it, and flattens the history of the next turn", async () => {
    rig = await startRig();
    const client = new OpenAI({
      baseURL: `${rig.url}/v1`,
      apiKey: "unused",
      maxRetries: 0,
      defaultHeaders: codexHeaders(SESSION),
    });
    const body = codexRequestBody(MODEL, SESSION, { stream: true });
    const stream = await client.responses.create({
      ...(body as unknown as OpenAI.Responses.ResponseCreateParamsStreaming),
      tools: NAMESPACE_AND_SEARCH as unknown as OpenAI.Responses.Tool[],
    });
    const added: ResponseFunctionToolCall[] = [];
    const doneNames: string[] = [];
    let completed: (Response & { x_agent_serve?: { adapted: string[] } }) | undefined;
    let meta: { adapted: string[] } | undefined;
    for await (const event of stream) {
      if (event.type === "response.output_item.added" && event.item.type === "function_call")
        added.push(event.item);
      if (event.type === "response.function_call_arguments.done") doneNames.push(event.name);
      if (event.type === "response.completed") {
        completed = event.response;
        meta = (event as unknown as { x_agent_serve: { adapted: string[] } }).x_agent_serve;
      }
    }
    expect(rig.log.at(-1)!.responseBody).toMatch(/"name":"multi_agent_v1__/);
    expect(added).toHaveLength(1);
    expect(added[0]!.namespace).toBe("multi_agent_v1");
    expect(NAMESPACED.has(added[0]!.name)).toBe(true);
    expect(doneNames).toEqual([added[0]!.name]);
    const call = completed!.output.find((item) => item.type === "function_call") as ResponseFunctionToolCall;
    expect(call).toMatchObject({ namespace: "multi_agent_v1", name: added[0]!.name });
    expect(completed!.tools).toEqual(NAMESPACE_AND_SEARCH);
    expect(meta!.adapted).toEqual(["flatten_namespace:multi_agent_v1", "drop_tool:web_search"]);

    // Turn 2 as Codex sends it: everything again, the call echoed with its namespace.
    const next = codexRequestBody(MODEL, SESSION, {
      stream: false,
      history: [
        { ...call, status: "completed" },
        { type: "function_call_output", id: "fco_1", call_id: call.call_id, output: "agent started" },
      ],
    });
    next["tools"] = NAMESPACE_AND_SEARCH;
    const answer = await post(rig.url, next);
    expect(answer.status).toBe(200);
    const echoed = engineRequest(rig.log).input.find(
      (item) => (item as { type?: string }).type === "function_call",
    ) as Record<string, unknown>;
    expect(echoed["name"]).toBe(`multi_agent_v1__${call.name}`);
    expect(echoed).not.toHaveProperty("namespace");
    // Re-rendered exactly as the engine wrote the call: turn 1 is all in its prefix cache.
    const usage = ((await answer.json()) as Response).usage!;
    const first = completed!.usage!;
    expect(usage.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(
      first.input_tokens + first.output_tokens - 16,
    );
  });

  it("serves all 9 of Codex's tools, and leaves a request of plain functions byte for byte", async () => {
    rig = await startRig();
    const full = await post(rig.url, codexRequestBody(MODEL, SESSION, { stream: true }));
    expect(full.status).toBe(200);
    await full.text();
    expect(engineRequest(rig.log).tools).toHaveLength(12);

    const plain = codexRequestBody(MODEL, SESSION, { stream: false });
    plain["tools"] = CODEX_TOOLS.filter((tool) => tool["type"] === "function");
    const raw = JSON.stringify(plain);
    const answer = await fetch(`${rig.url}/v1/responses`, {
      method: "POST",
      headers: codexHeaders(SESSION),
      body: raw,
    });
    expect(answer.status).toBe(200);
    expect(rig.log.at(-1)!.requestBody).toBe(raw);
    expect((await answer.json()) as object).not.toHaveProperty("x_agent_serve.adapted");
    expect(answer.headers.get("x-agent-serve-adapted")).toBeNull();
  });
});

describe("each adaptation turned off: the engine's refusal reaches the client", () => {
  it("flatten_namespaces: false relays the engine's 400 for the namespace tool", async () => {
    rig = await startRig({ flatten_namespaces: false });
    const answer = await post(rig.url, codexRequestBody(MODEL, SESSION, { stream: true }));
    expect(answer.status).toBe(400);
    expect(((await answer.json()) as { error: { message: string } }).error.message).toBe(
      "tool type namespace not supported",
    );
    expect(rig.log.at(-1)!.status).toBe(400);
  });

  it("drop_hosted_tools: false relays the engine's 400 for web_search", async () => {
    rig = await startRig({ drop_hosted_tools: false });
    const answer = await post(rig.url, codexRequestBody(MODEL, SESSION, { stream: false }));
    expect(answer.status).toBe(400);
    expect(((await answer.json()) as { error: { message: string } }).error.message).toBe(
      "tool type web_search not supported",
    );
    // The namespace was still flattened: only web_search was left for the engine to refuse.
    expect(engineRequest(rig.log).tools.filter((tool) => tool.type === "namespace")).toEqual([]);
  });
});

describe("Anthropic server tools on /v1/messages", () => {
  const tools = [
    {
      name: "Bash",
      description: "Run a shell command",
      input_schema: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
    },
    { type: "web_search_20250305", name: "web_search", max_uses: 5 },
  ];
  const body = {
    model: MODEL,
    max_tokens: 64,
    messages: [{ role: "user", content: "look it up" }],
    tools,
    tool_choice: { type: "tool", name: "web_search" },
  };
  const send = (url: string) =>
    fetch(`${url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-claude-code-session-id": "cc-1" },
      body: JSON.stringify(body),
    });

  it("are dropped for the engine, which refuses them (it needs an input_schema), unless turned off", async () => {
    rig = await startRig(undefined, { toolTypes: "vllm" });
    const adapted = await send(rig.url);
    expect(adapted.status).toBe(200);
    const json = (await adapted.json()) as { content: { type: string; name?: string }[] };
    expect(json.content[0]).toMatchObject({ type: "tool_use", name: "Bash" });
    expect(adapted.headers.get("x-agent-serve-adapted")).toBe(
      "drop_tool:web_search_20250305,tool_choice:auto",
    );
    expect(engineRequest(rig.log)).toMatchObject({ tools: [tools[0]], tool_choice: { type: "auto" } });
    await rig.close();

    rig = await startRig({ drop_hosted_tools: false }, { toolTypes: "vllm" });
    const refused = await send(rig.url);
    expect(refused.status).toBe(400);
    // The engine's message, relayed (the gateway relays an engine's 4xx in the OpenAI envelope on every route).
    const refusal = (await refused.json()) as { error: { message: string } };
    expect(refusal.error.message).toBe("tools.1.input_schema: Field required");
  });
});
