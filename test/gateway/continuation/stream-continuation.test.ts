// Streams continued on the next engine after theirs broke mid-answer (src/gateway/continuation), over real
// loopback with simulated engines and the official SDKs parsing the spliced streams. Both engines draw the same
// replies (same seed), and a continued simulated reply goes on as the engine would have (continue_final_message):
// so a cut-and-continued answer must equal the answer without a fault, token for token.
import Anthropic from "@anthropic-ai/sdk";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { streamText } from "ai";
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { metricValue, scrape, type Cluster } from "../../helpers/cluster.js";
import {
  armFault,
  engineFaults,
  expectContinuedOnce,
  sessionClient,
  twoEngines,
  type FaultCase,
} from "./two-engines.js";

const SESSION = "continued-session";
const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "read_file",
      description: "Read a file",
      parameters: {
        type: "object",
        properties: { path: { type: "string" }, lines: { type: "integer" } },
        required: ["path", "lines"],
      },
    },
  },
];

function openai(cluster: Cluster): OpenAI {
  return sessionClient(cluster, SESSION);
}

function anthropic(cluster: Cluster): Anthropic {
  return new Anthropic({
    baseURL: cluster.url,
    apiKey: "none",
    maxRetries: 0,
    defaultHeaders: { "x-session-id": SESSION },
  });
}

/** The engine the session's turns go to (its first turn tells). */
async function servingEngine(
  cluster: Cluster,
  path = "/v1/chat/completions",
  body?: object,
): Promise<string> {
  const response = await fetch(`${cluster.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": SESSION },
    body: JSON.stringify(
      body ?? { model: "sim-small", messages: [{ role: "user", content: "warm up" }], max_tokens: 2 },
    ),
  });
  await response.text();
  return response.headers.get("x-agent-serve-backend")!;
}

interface ChatStreamRead {
  text: string;
  ids: Set<string>;
  usage: OpenAI.CompletionUsage | undefined;
  finish: string | null | undefined;
  meta: Record<string, unknown> | undefined;
  errors: number;
}

const CHAT = {
  model: "sim-small",
  messages: [{ role: "user" as const, content: "Explain the prefix cache in a few words." }],
  max_tokens: 60,
  stream: true as const,
  stream_options: { include_usage: true },
};

/** Streams a chat answer through the SDK; `midway` runs after the given number of content chunks. */
async function readChat(
  client: OpenAI,
  midway?: { after: number; run: () => void },
): Promise<ChatStreamRead> {
  const stream = await client.chat.completions.create(CHAT);
  const read: ChatStreamRead = {
    text: "",
    ids: new Set(),
    usage: undefined,
    finish: undefined,
    meta: undefined,
    errors: 0,
  };
  let contentChunks = 0;
  for await (const chunk of stream) {
    read.ids.add(chunk.id);
    const choice = chunk.choices[0];
    if (choice?.delta.content) {
      read.text += choice.delta.content;
      if (++contentChunks === midway?.after) midway.run();
    }
    if (choice?.finish_reason) read.finish = choice.finish_reason;
    if (chunk.usage) read.usage = chunk.usage;
    const meta = (chunk as unknown as { x_agent_serve?: Record<string, unknown> }).x_agent_serve;
    if (meta !== undefined) read.meta = meta;
  }
  return read;
}

describe("stream continuation", () => {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  it.each<FaultCase>(engineFaults(6))(
    "chat, %s: the same answer, ids and usage as without a fault (openai SDK)",
    async (_name, profile, fault, overrides) => {
      cluster = await twoEngines(overrides, 0, profile);
      const client = openai(cluster);
      const first = await servingEngine(cluster);
      const reference = await readChat(client);
      expect(reference.meta?.["migrated"]).toBeUndefined();
      const midway = armFault(cluster.engines.get(first)!, fault);
      const continued = await readChat(client, midway);
      expect(continued.text).toBe(reference.text);
      expect(continued.ids.size).toBe(1);
      expect(continued.finish).toBe(reference.finish);
      expect(continued.usage?.prompt_tokens).toBe(reference.usage?.prompt_tokens);
      expect(continued.usage?.completion_tokens).toBe(reference.usage?.completion_tokens);
      await expectContinuedOnce(cluster, continued.meta, first, fault);
    },
  );

  it("chat: a tool call cut inside its arguments is restarted; the SDK assembles the same call", async () => {
    cluster = await twoEngines({}, 1);
    const client = openai(cluster);
    const first = await servingEngine(cluster);
    const body = { ...CHAT, tools: TOOLS, stream: true as const };
    const reference = await client.chat.completions.stream(body).finalChatCompletion();
    const call = reference.choices[0]!.message.tool_calls![0]!;
    expect(call.type).toBe("function");
    cluster.engines.get(first)!.setFault({ kind: "cut_stream", afterChunks: 4 });
    const runner = client.chat.completions.stream(body);
    let meta: Record<string, unknown> | undefined;
    runner.on("chunk", (chunk) => {
      const seen = (chunk as unknown as { x_agent_serve?: Record<string, unknown> }).x_agent_serve;
      if (seen !== undefined) meta = seen;
    });
    const continued = await runner.finalChatCompletion();
    // Each answer mints its own call ids; the client keeps the first engine's.
    const calls = (c: OpenAI.Chat.Completions.ChatCompletion) =>
      c.choices[0]!.message.tool_calls!.map((t) => (t.type === "function" ? t.function : t));
    expect(calls(continued)).toEqual(calls(reference));
    expect(continued.choices[0]!.finish_reason).toBe("tool_calls");
    expect(meta?.["migrated"]).toMatchObject({ from: [first], tool_call: "restarted" });
  });

  it("completions: prompt + text goes on on the next engine; nothing repeated or missing", async () => {
    cluster = await twoEngines();
    const client = openai(cluster);
    const request = { model: "sim-small", prompt: "Once upon a time", max_tokens: 40, seed: 3 };
    const first = await servingEngine(cluster, "/v1/completions", { ...request, max_tokens: 2 });
    const reference = await client.completions.create(request);
    cluster.engines.get(first)!.setFault({ kind: "cut_stream", afterChunks: 5 });
    const stream = await client.completions.create({
      ...request,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    const ids = new Set<string>();
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      ids.add(chunk.id);
      text += chunk.choices[0]?.text ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    // The first five events were the first engine's (one token each); the rest is what the next engine answers
    // to the prompt plus those five, asked directly.
    const other = [...cluster.engines.entries()].find(([id]) => id !== first)![1];
    const relayed = await firstTokens(other.url, request, 5);
    expect(reference.choices[0]!.text.startsWith(relayed)).toBe(true);
    const direct = await fetch(`${other.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        ...request,
        prompt: request.prompt + relayed,
        max_tokens: request.max_tokens - 5,
      }),
    }).then((r) => r.json() as Promise<OpenAI.Completion>);
    expect(text).toBe(relayed + direct.choices[0]!.text);
    expect(ids.size).toBe(1);
    expect(usage?.prompt_tokens).toBe(reference.usage?.prompt_tokens);
    expect(usage?.completion_tokens).toBe(5 + direct.usage!.completion_tokens);
  });

  it("Messages: text cut mid-block goes on in the same block; the Anthropic SDK reads the same message", async () => {
    cluster = await twoEngines({}, 0, "qwen2.5-7b");
    const client = anthropic(cluster);
    const body = {
      model: "sim-small",
      max_tokens: 60,
      messages: [{ role: "user" as const, content: "Explain the prefix cache in a few words." }],
    };
    const first = await servingEngine(cluster, "/v1/messages", { ...body, max_tokens: 2 });
    const reference = await client.messages.stream(body).finalMessage();
    cluster.engines.get(first)!.setFault({ kind: "cut_stream", afterChunks: 14 });
    const ids = new Set<string>();
    const stream = client.messages.stream(body);
    let meta: Record<string, unknown> | undefined;
    stream.on("streamEvent", (event) => {
      if (event.type === "message_start") ids.add(event.message.id);
      if (event.type === "message_delta") meta = deltaMeta(event);
    });
    const continued = await stream.finalMessage();
    expect(continued.content).toEqual(reference.content);
    expect(continued.stop_reason).toBe(reference.stop_reason);
    expect(continued.usage.output_tokens).toBe(reference.usage.output_tokens);
    expect(continued.usage.input_tokens + (continued.usage.cache_read_input_tokens ?? 0)).toBe(
      reference.usage.input_tokens + (reference.usage.cache_read_input_tokens ?? 0),
    );
    expect(ids.size).toBe(1);
    expect(meta?.["migrated"]).toMatchObject({ from: [first], tool_call: "none" });
  });

  it("Messages: a tool_use cut inside its input is restarted under the same block index", async () => {
    cluster = await twoEngines({}, 1, "qwen2.5-7b");
    const client = anthropic(cluster);
    const body = {
      model: "sim-small",
      max_tokens: 100,
      messages: [{ role: "user" as const, content: "Read the config." }],
      tools: [
        {
          name: "read_file",
          description: "Read a file",
          input_schema: {
            type: "object" as const,
            properties: { path: { type: "string" }, lines: { type: "integer" } },
            required: ["path", "lines"],
          },
        },
      ],
    };
    const first = await servingEngine(cluster, "/v1/messages", { ...body, max_tokens: 2 });
    const reference = await client.messages.stream(body).finalMessage();
    expect(reference.content.some((b) => b.type === "tool_use")).toBe(true);
    cluster.engines.get(first)!.setFault({ kind: "cut_stream", afterChunks: 4 });
    const stream = client.messages.stream(body);
    let meta: Record<string, unknown> | undefined;
    stream.on("streamEvent", (event) => {
      if (event.type === "message_delta") meta = deltaMeta(event);
    });
    const continued = await stream.finalMessage();
    const calls = (m: Anthropic.Message) =>
      m.content.map((b) => (b.type === "tool_use" ? { name: b.name, input: b.input } : b));
    expect(calls(continued)).toEqual(calls(reference));
    expect(continued.stop_reason).toBe("tool_use");
    expect(meta?.["migrated"]).toMatchObject({ from: [first], tool_call: "restarted" });
  });

  it("AI SDK (ai + @ai-sdk/openai-compatible): streamText reads the continued answer and its usage", async () => {
    cluster = await twoEngines();
    const first = await servingEngine(cluster);
    const model = createOpenAICompatible({
      name: "agent-serve",
      baseURL: `${cluster.url}/v1`,
      headers: { "x-session-id": SESSION },
      includeUsage: true,
    })("sim-small");
    const ask = () =>
      streamText({
        model,
        prompt: CHAT.messages[0]!.content,
        maxOutputTokens: CHAT.max_tokens,
        maxRetries: 0,
      });
    const reference = ask();
    const referenceText = await reference.text;
    const referenceUsage = await reference.usage;
    cluster.engines.get(first)!.setFault({ kind: "cut_stream", afterChunks: 9 });
    const continued = ask();
    expect(await continued.text).toBe(referenceText);
    const usage = await continued.usage;
    expect(usage.inputTokens).toBe(referenceUsage.inputTokens);
    expect(usage.outputTokens).toBe(referenceUsage.outputTokens);
    expect(await continued.finishReason).toBe(await reference.finishReason);
    const metrics = await scrape(cluster.url);
    expect(metricValue(metrics, "agentserve_migrations_total", { outcome: "continued" })).toBe(1);
  });
});

/** The first `count` tokens' text of the engine's answer to a completions request (one token per event). */
async function firstTokens(
  engineUrl: string,
  request: Record<string, unknown>,
  count: number,
): Promise<string> {
  const response = await fetch(`${engineUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ ...request, max_tokens: count }),
  }).then((r) => r.json() as Promise<OpenAI.Completion>);
  return response.choices[0]!.text;
}

/** x_agent_serve of a message_delta event (where the gateway puts the continued answer's metadata). */
function deltaMeta(event: Anthropic.MessageStreamEvent): Record<string, unknown> | undefined {
  return (event as unknown as { x_agent_serve?: Record<string, unknown> }).x_agent_serve;
}
