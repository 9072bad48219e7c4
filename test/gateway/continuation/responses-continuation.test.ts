// Responses API streams continued on the next engine after theirs broke mid-answer (through the engine's chat API,
// src/gateway/continuation/responses-as-chat.ts), over real loopback with simulated engines and the official
// openai SDK parsing the spliced stream. Both engines draw the same replies (same seed), and a continued reply goes
// on as the engine would have: so a broken-and-continued answer must equal the answer without a fault.
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

const SESSION = "continued-responses";
const BODY = {
  model: "sim-small",
  input: "Explain the prefix cache in a few words.",
  max_output_tokens: 60,
  store: false,
};
const TOOLS: OpenAI.Responses.FunctionTool[] = [
  {
    type: "function",
    name: "read_file",
    description: "Read a file",
    strict: false,
    parameters: {
      type: "object",
      properties: { path: { type: "string" }, lines: { type: "integer" } },
      required: ["path", "lines"],
    },
  },
];

function openai(cluster: Cluster): OpenAI {
  return sessionClient(cluster, SESSION);
}

/** The engine the session's turns go to (its first turn tells). */
async function servingEngine(cluster: Cluster): Promise<string> {
  const response = await fetch(`${cluster.url}/v1/responses`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": SESSION },
    body: JSON.stringify({ ...BODY, max_output_tokens: 2 }),
  });
  await response.text();
  return response.headers.get("x-agent-serve-backend")!;
}

interface ResponsesRead {
  final: OpenAI.Responses.Response;
  events: OpenAI.Responses.ResponseStreamEvent[];
  meta: Record<string, unknown> | undefined;
}

/** Streams a response through the SDK's responses.stream (it checks every event against its snapshot). */
async function readResponse(
  client: OpenAI,
  body: Record<string, unknown>,
  midway?: { after: number; run: () => void },
): Promise<ResponsesRead> {
  const stream = client.responses.stream({
    ...body,
    stream: true,
  } as OpenAI.Responses.ResponseCreateParamsStreaming);
  const events: OpenAI.Responses.ResponseStreamEvent[] = [];
  let deltas = 0;
  let meta: Record<string, unknown> | undefined;
  for await (const event of stream) {
    events.push(event);
    if (event.type === "response.output_text.delta" && ++deltas === midway?.after) midway.run();
    const seen = (event as unknown as { x_agent_serve?: Record<string, unknown> }).x_agent_serve;
    if (seen !== undefined) meta = seen;
  }
  return { final: await stream.finalResponse(), events, meta };
}

/** What a client reads of the stream's own structure: one response id, sequence numbers 0, 1, 2, ... */
function expectOneStream(read: ResponsesRead): void {
  expect(read.events.map((e) => e.sequence_number)).toEqual(read.events.map((_, i) => i));
  const ids = new Set(
    read.events.flatMap((e) => ("response" in e && e.response !== undefined ? [e.response.id] : [])),
  );
  expect(ids.size).toBe(1);
  // Every delta names an item that was added at that output_index.
  const added = new Map<number, string>();
  for (const event of read.events) {
    if (event.type === "response.output_item.added") added.set(event.output_index, event.item.id!);
    if (
      event.type === "response.output_text.delta" ||
      event.type === "response.function_call_arguments.delta"
    )
      expect(added.get(event.output_index)).toBe(event.item_id);
  }
}

function calls(response: OpenAI.Responses.Response): { name: string; arguments: string }[] {
  return response.output.flatMap((item) =>
    item.type === "function_call" ? [{ name: item.name, arguments: item.arguments }] : [],
  );
}

describe("Responses stream continuation", () => {
  let cluster: Cluster | undefined;
  afterEach(async () => {
    await cluster?.close();
    cluster = undefined;
  });

  it.each<FaultCase>(engineFaults(9))(
    "%s: the same text, response id, items and usage as without a fault (openai SDK responses.stream)",
    async (_name, profile, fault, overrides) => {
      cluster = await twoEngines(overrides, 0, profile);
      const client = openai(cluster);
      const first = await servingEngine(cluster);
      const reference = await readResponse(client, BODY);
      expect(reference.meta?.["migrated"]).toBeUndefined();
      const midway = armFault(cluster.engines.get(first)!, fault);
      const continued = await readResponse(client, BODY, midway);
      expectOneStream(continued);
      expect(continued.final.output_text).toBe(reference.final.output_text);
      expect(continued.final.output_text.length).toBeGreaterThan(0);
      expect(continued.final.output).toHaveLength(reference.final.output.length);
      expect(continued.final.status).toBe(reference.final.status);
      // The text deltas the client read add up to the final text: nothing repeated or missing.
      const deltas = continued.events.flatMap((e) =>
        e.type === "response.output_text.delta" ? [e.delta] : [],
      );
      expect(deltas.join("")).toBe(reference.final.output_text);
      expect(continued.final.usage?.input_tokens).toBe(reference.final.usage?.input_tokens);
      expect(continued.final.usage?.output_tokens).toBe(reference.final.usage?.output_tokens);
      await expectContinuedOnce(cluster, continued.meta, first, fault);
    },
  );

  it("a function call cut inside its arguments is restarted under the same item; the SDK assembles the same call", async () => {
    cluster = await twoEngines({}, 1);
    const client = openai(cluster);
    const first = await servingEngine(cluster);
    const body = { ...BODY, input: "Read the config.", tools: TOOLS };
    const reference = await readResponse(client, body);
    expect(calls(reference.final).length).toBeGreaterThan(0);
    // response.created, in_progress, the call's item, then its argument deltas: the cut comes inside them.
    cluster.engines.get(first)!.setFault({ kind: "cut_stream", afterChunks: 5 });
    const continued = await readResponse(client, body);
    expectOneStream(continued);
    expect(calls(continued.final)).toEqual(calls(reference.final));
    const argumentDeltas = continued.events.flatMap((e) =>
      e.type === "response.function_call_arguments.delta" ? [e.delta] : [],
    );
    expect(argumentDeltas.join("")).toBe(
      calls(reference.final)
        .map((c) => c.arguments)
        .join(""),
    );
    expect(continued.meta?.["migrated"]).toMatchObject({ from: [first], tool_call: "restarted" });
  });

  it("store: a continued response is not stored anywhere; a chain from it gets a clear 404, the full conversation an answer", async () => {
    cluster = await twoEngines();
    const client = openai(cluster);
    const first = await servingEngine(cluster);
    const body = { ...BODY, store: true };
    cluster.engines.get(first)!.setFault({ kind: "cut_stream", afterChunks: 9 });
    const continued = await readResponse(client, body);
    expect(continued.meta?.["migrated"]).toMatchObject({ from: [first] });
    const chained = client.responses.create({
      model: "sim-small",
      input: "And then?",
      previous_response_id: continued.final.id,
      max_output_tokens: 5,
    });
    await expect(chained).rejects.toMatchObject({ status: 404 });
    await expect(chained).rejects.toThrow(continued.final.id);
    const resent = await client.responses.create({
      model: "sim-small",
      input: [
        { role: "user", content: BODY.input },
        { role: "assistant", content: continued.final.output_text },
        { role: "user", content: "And then?" },
      ],
      max_output_tokens: 5,
    });
    expect(resent.output_text.length).toBeGreaterThan(0);
  });

  it("guided decoding (text.format json_schema): not continued; its error event ends it as before", async () => {
    cluster = await twoEngines({}, 0, "qwen2.5-7b");
    const client = openai(cluster);
    const first = await servingEngine(cluster);
    cluster.engines.get(first)!.setFault({ kind: "cut_stream", afterChunks: 6 });
    const body = {
      ...BODY,
      text: {
        format: {
          type: "json_schema",
          name: "answer",
          schema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
        },
      },
    };
    const stream = await client.responses.create({
      ...body,
      stream: true,
    } as OpenAI.Responses.ResponseCreateParamsStreaming);
    const types: string[] = [];
    let error: string | undefined;
    try {
      for await (const event of stream) {
        types.push(event.type);
        if (event.type === "error") error = event.message;
      }
    } catch (err) {
      error = err instanceof Error ? err.message : String(err);
    }
    expect(types).not.toContain("response.completed");
    expect(error).toMatch(/mid-answer/);
    const metrics = await scrape(cluster.url);
    expect(metricValue(metrics, "agentserve_migrations_total", { outcome: "impossible" })).toBe(1);
  });
});
