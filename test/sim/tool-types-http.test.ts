// Codex CLI's tools over real HTTP, straight to the simulator: accepted as vLLM >= 0.25.1 accepts them
// (namespaced calls named back, the history re-rendered from the cache), refused as vLLM's gpt-oss path refuses them.
import OpenAI from "openai";
import type { Response, ResponseFunctionToolCall } from "openai/resources/responses/responses";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";
import { CODEX_TOOLS, codexHeaders, codexRequestBody } from "../helpers/codex-request.js";

const SESSION = "01a23f2c-7d67-7781-9625-7dc9d2c9f0e9";
/** The namespace and web_search alone: whatever the model calls is a namespaced function. */
const NAMESPACE_AND_SEARCH = CODEX_TOOLS.filter((tool) => tool["type"] !== "function");

let vllm: SimEngineHandle;
let gptOss: SimEngineHandle;

beforeAll(async () => {
  vllm = await startSimEngine({ profile: "instant", seed: 3 });
  gptOss = await startSimEngine({ profile: "instant", seed: 3, toolTypes: "gpt-oss" });
});
afterAll(async () => {
  await Promise.all([vllm.close(), gptOss.close()]);
});

async function post(engine: SimEngineHandle, body: Record<string, unknown>): Promise<globalThis.Response> {
  return fetch(`${engine.url}/v1/responses`, {
    method: "POST",
    headers: codexHeaders(SESSION),
    body: JSON.stringify(body),
  });
}

describe("a Codex request to an engine that follows vLLM", () => {
  it("answers 200 and names a namespaced call as Codex expects, then reuses the cache for the history", async () => {
    const first = codexRequestBody(vllm.model, SESSION, { stream: false });
    first["tools"] = NAMESPACE_AND_SEARCH;
    const answer = await post(vllm, first);
    expect(answer.status).toBe(200);
    const response = (await answer.json()) as Response;
    const call = response.output.find((item) => item.type === "function_call") as ResponseFunctionToolCall;
    expect(call.namespace).toBe("multi_agent_v1");
    expect(["close_agent", "resume_agent", "send_input", "spawn_agent", "wait_agent"]).toContain(call.name);
    expect(response.tools).toEqual(NAMESPACE_AND_SEARCH);

    // Turn 2, as Codex sends it: the whole conversation, the call echoed with its namespace.
    const second = codexRequestBody(vllm.model, SESSION, {
      stream: false,
      history: [
        { ...call, status: "completed" },
        { type: "function_call_output", id: "fco_1", call_id: call.call_id, output: "agent started" },
      ],
    });
    second["tools"] = NAMESPACE_AND_SEARCH;
    const next = await post(vllm, second);
    expect(next.status).toBe(200);
    const nextResponse = (await next.json()) as Response;
    // The call re-renders as the flat-named text the model wrote, so every block of turn 1 is a cache hit.
    const firstTokens = response.usage!.input_tokens + response.usage!.output_tokens;
    expect(nextResponse.usage!.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(firstTokens - 16);
  });

  it("streams a namespaced call with its namespace, which the openai SDK reads", async () => {
    const client = new OpenAI({ baseURL: `${vllm.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const body = codexRequestBody(vllm.model, SESSION, { stream: true });
    const stream = await client.responses.create({
      ...(body as unknown as OpenAI.Responses.ResponseCreateParamsStreaming),
      tools: NAMESPACE_AND_SEARCH as unknown as OpenAI.Responses.Tool[],
    });
    const added: ResponseFunctionToolCall[] = [];
    let completed: Response | undefined;
    for await (const event of stream) {
      if (event.type === "response.output_item.added" && event.item.type === "function_call")
        added.push(event.item);
      if (event.type === "response.completed") completed = event.response;
    }
    expect(added).toHaveLength(1);
    expect(added[0]!.namespace).toBe("multi_agent_v1");
    const done = completed!.output.find((item) => item.type === "function_call") as ResponseFunctionToolCall;
    expect(done).toMatchObject({
      namespace: "multi_agent_v1",
      name: added[0]!.name,
      call_id: added[0]!.call_id,
    });
  });

  it("accepts all 9 of Codex's tools", async () => {
    const answer = await post(vllm, codexRequestBody(vllm.model, SESSION, { stream: false }));
    expect(answer.status).toBe(200);
  });
});

describe("a Codex request to an engine that follows vLLM's gpt-oss path", () => {
  it("is refused with vLLM's 400 for the namespace tool", async () => {
    const answer = await post(gptOss, codexRequestBody(gptOss.model, SESSION, { stream: true }));
    expect(answer.status).toBe(400);
    const body = (await answer.json()) as { error: { message: string; type: string } };
    expect(body.error).toMatchObject({
      message: "tool type namespace not supported",
      type: "BadRequestError",
    });
  });
});

describe("chat-completions tools over HTTP", () => {
  it("takes a tool without a type and refuses a hosted tool type with a 400", async () => {
    const chat = (tools: unknown[]) =>
      fetch(`${vllm.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], tools, max_tokens: 64 }),
      });
    const typeless = await chat([
      { function: { name: "read", parameters: { type: "object", properties: {} } } },
    ]);
    expect(typeless.status).toBe(200);
    const json = (await typeless.json()) as {
      choices: { message: { tool_calls: { function: { name: string } }[] } }[];
    };
    expect(json.choices[0]!.message.tool_calls[0]!.function.name).toBe("read");
    const hosted = await chat([{ type: "web_search" }]);
    expect(hosted.status).toBe(400);
    expect(((await hosted.json()) as { error: { message: string } }).error.message).toBe(
      "tools[0].type: Input should be 'function'",
    );
  });
});
