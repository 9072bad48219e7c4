// One model call through the openai SDK over real HTTP: tool-call deltas joined, usage, routing headers, TTFT.
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayModel } from "../../src/agent/model-call.js";
import { Toolbox } from "../../src/agent/toolbox.js";
import { calculatorTool } from "../../src/agent/tools/calculator.js";

/** A stand-in gateway (unit test only): answers with the SSE a vLLM engine streams for parallel tool calls. */
const CHUNKS = [
  { choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }] },
  {
    choices: [
      {
        index: 0,
        delta: {
          tool_calls: [
            { index: 0, id: "call_1", type: "function", function: { name: "calcu", arguments: "" } },
          ],
        },
      },
    ],
  },
  {
    choices: [
      {
        index: 0,
        delta: { tool_calls: [{ index: 0, function: { name: "lator", arguments: '{"expression": ' } }] },
      },
    ],
  },
  {
    choices: [
      {
        index: 0,
        delta: {
          tool_calls: [
            {
              index: 1,
              id: "call_2",
              type: "function",
              function: { name: "read_file", arguments: '{"path":"README.md"}' },
            },
          ],
        },
      },
    ],
  },
  { choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '"2^10"}' } }] } }] },
  { choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] },
  {
    choices: [],
    usage: {
      prompt_tokens: 900,
      completion_tokens: 30,
      total_tokens: 930,
      prompt_tokens_details: { cached_tokens: 768 },
    },
  },
];

describe("gatewayModel", () => {
  let server: Server;
  let baseURL: string;
  const seen: { headers: IncomingMessage["headers"]; body: Record<string, unknown> }[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      let raw = "";
      req.on("data", (chunk: Buffer) => (raw += chunk.toString()));
      req.on("end", () => {
        seen.push({ headers: req.headers, body: JSON.parse(raw) as Record<string, unknown> });
        if (req.headers["x-session-id"] === "refused") {
          res.writeHead(503, { "content-type": "application/json" });
          res.end(
            JSON.stringify({
              error: {
                message: "no healthy backend",
                type: "service_unavailable",
                param: null,
                code: "no_backend",
              },
            }),
          );
          return;
        }
        res.writeHead(200, {
          "content-type": "text/event-stream",
          "x-agent-serve-backend": "small-1",
          "x-agent-serve-tier": "small",
          "x-agent-serve-affinity-hit": "true",
        });
        for (const chunk of CHUNKS)
          res.write(
            `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", ...chunk })}\n\n`,
          );
        // The gateway's metadata chunk: the reason is read from here while no header carries it.
        res.write(
          `data: ${JSON.stringify({ object: "chat.completion.chunk", choices: [], x_agent_serve: { backend_id: "small-1", affinity_hit: true, reason: "affinity_hit" } })}\n\n`,
        );
        res.end("data: [DONE]\n\n");
      });
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    baseURL = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  });

  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const modelFor = (sessionId: string) => {
    let now = 0;
    const client = new OpenAI({
      baseURL,
      apiKey: "k",
      maxRetries: 0,
      defaultHeaders: { "X-Session-Id": sessionId, "X-Tier-Hint": "small" },
    });
    return gatewayModel({ client, model: "auto", maxTokens: 64, nowMs: () => (now += 10) });
  };

  it("streams a call and returns its tool calls, usage and placement", async () => {
    const tools = new Toolbox([calculatorTool()]).definitions();
    const step = await modelFor("s-1")({
      messages: [{ role: "user", content: "hi" }],
      tools,
      toolChoice: "auto",
    });
    expect(step).toMatchObject({
      status: 200,
      content: "",
      finishReason: "tool_calls",
      toolCalls: [
        { id: "call_1", name: "calculator", arguments: '{"expression": "2^10"}' },
        { id: "call_2", name: "read_file", arguments: '{"path":"README.md"}' },
      ],
      backend: "small-1",
      tier: "small",
      affinityHit: true,
      reason: "affinity_hit",
      promptTokens: 900,
      cachedTokens: 768,
      completionTokens: 30,
    });
    expect(step.error).toBeUndefined();
    // TTFT is taken at the first tool-call delta, not at the empty role chunk before it.
    expect(step.ttftMs).not.toBeNull();
    expect(step.ttftMs!).toBeLessThan(step.e2eMs);
    const request = seen.at(-1)!;
    expect(request.headers["x-session-id"]).toBe("s-1");
    expect(request.headers["x-tier-hint"]).toBe("small");
    expect(request.body).toMatchObject({
      model: "auto",
      stream: true,
      stream_options: { include_usage: true },
      tool_choice: "auto",
      max_tokens: 64,
    });
  });

  it("turns an HTTP error into a failed step with its status", async () => {
    const step = await modelFor("refused")({
      messages: [{ role: "user", content: "hi" }],
      tools: [],
      toolChoice: "none",
    });
    expect(step.status).toBe(503);
    expect(step.error).toContain("no healthy backend");
    expect(step.toolCalls).toEqual([]);
    expect(seen.at(-1)!.body).not.toHaveProperty("tools");
    expect(seen.at(-1)!.body).not.toHaveProperty("tool_choice");
  });
});
