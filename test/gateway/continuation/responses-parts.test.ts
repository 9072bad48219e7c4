// The pure parts of a Responses API continuation, without sockets: which requests can be continued, the chat
// request that continues one, what the transcript records of the client's stream, and the splicing of the next
// engine's chat chunks into the client's Responses events.
import { describe, expect, it } from "vitest";
import { CallRestorer } from "../../../src/gateway/adaptation/restore.js";
import { continuationBody } from "../../../src/gateway/continuation/continuation-body.js";
import { continuationBlocker } from "../../../src/gateway/continuation/eligibility.js";
import { responsesAsChat } from "../../../src/gateway/continuation/responses-as-chat.js";
import { ResponsesSpliceRelay } from "../../../src/gateway/continuation/responses-splice.js";
import { ResponsesTranscript } from "../../../src/gateway/continuation/responses-transcript.js";
import { parseEvents } from "../../../src/gateway/continuation/sse-events.js";
import { pushAll } from "./relay-bytes.js";

const SETTINGS = { enabled: true, maxContinuations: 2, exceptTiers: new Set<string>() };
const META = { backend_id: "e2", migrated: { from: ["e1"], cause: "cut", tool_call: "none" } };

/** A Responses stream as an engine writes it: `event: type` and the numbered data. */
function responsesEvents(events: [string, Record<string, unknown>][], from = 0): string {
  return events
    .map(([type, fields], i) => {
      const data = JSON.stringify({ type, sequence_number: from + i, ...fields });
      return `event: ${type}\ndata: ${data}\n\n`;
    })
    .join("");
}

function chatChunk(delta: object, finish: string | null = null): string {
  const chunk = { id: "chatcmpl-9", object: "chat.completion.chunk", model: "m", created: 1 };
  return `data: ${JSON.stringify({ ...chunk, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
}

function usageChunk(prompt: number, completion: number): string {
  const usage = { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion };
  return `data: ${JSON.stringify({ id: "chatcmpl-9", choices: [], usage })}\n\n`;
}

const RESPONSE = { id: "resp_abc", object: "response", status: "in_progress", model: "m", output: [] };
const MESSAGE = { id: "msg_1", type: "message", role: "assistant", status: "in_progress", content: [] };

/** The start of an answer: created, the message and its part, then the given text deltas. */
function textSoFar(deltas: string[]): string {
  return responsesEvents([
    ["response.created", { response: RESPONSE }],
    ["response.in_progress", { response: RESPONSE }],
    ["response.output_item.added", { output_index: 0, item: MESSAGE }],
    [
      "response.content_part.added",
      { item_id: "msg_1", output_index: 0, content_index: 0, part: { type: "output_text", text: "" } },
    ],
    ...deltas.map((delta): [string, Record<string, unknown>] => [
      "response.output_text.delta",
      { item_id: "msg_1", output_index: 0, content_index: 0, delta },
    ]),
  ]);
}

/** A transcript of an answer cut inside its first function call, after `args` of its arguments. */
function callSoFar(call: Record<string, unknown>, args: string): ResponsesTranscript {
  const transcript = new ResponsesTranscript();
  transcript.record(
    parseEvents(
      responsesEvents([
        ["response.created", { response: RESPONSE }],
        ["response.output_item.added", { output_index: 0, item: call }],
        ["response.function_call_arguments.delta", { item_id: call["id"], output_index: 0, delta: args }],
      ]),
    ),
  );
  return transcript;
}

function sent(text: string): Record<string, unknown>[] {
  return parseEvents(text).map((e) => JSON.parse(e.data) as Record<string, unknown>);
}

describe("which Responses streams are continued", () => {
  const blocker = (body: Record<string, unknown>) => continuationBlocker("responses", body, "t", SETTINGS);

  it("text and function calls, namespaces and hosted tools (the adaptation handles them) are continued", () => {
    expect(blocker({ input: "hi" })).toBeUndefined();
    expect(
      blocker({
        input: [
          { role: "user", content: [{ type: "input_text", text: "hi" }] },
          { type: "function_call", call_id: "c", name: "f", arguments: "{}" },
          { type: "function_call_output", call_id: "c", output: "ok" },
          { type: "reasoning", summary: [] },
        ],
        tools: [
          { type: "function", name: "f" },
          { type: "namespace", name: "n", tools: [] },
          { type: "web_search" },
        ],
        tool_choice: { type: "function", name: "f" },
        text: { format: { type: "text" } },
      }),
    ).toBeUndefined();
  });

  it("a stored conversation, guided decoding, logprobs, images and other tools are not", () => {
    expect(blocker({ input: "hi", previous_response_id: "resp_1" })).toMatch(/previous_response_id/);
    expect(blocker({ input: "hi", text: { format: { type: "json_schema", schema: {} } } })).toMatch(/guided/);
    expect(blocker({ input: "hi", top_logprobs: 3 })).toMatch(/top_logprobs/);
    expect(blocker({ input: "hi", include: ["message.output_text.logprobs"] })).toMatch(/logprobs/);
    expect(
      blocker({ input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }] }),
    ).toMatch(/input_image/);
    expect(blocker({ input: "hi", tools: [{ type: "custom", name: "x" }] })).toMatch(/custom/);
    expect(blocker({ input: "hi", tool_choice: { type: "allowed_tools", tools: [] } })).toMatch(
      /allowed_tools/,
    );
    expect(blocker({ input: [{ type: "item_reference", id: "x" }] })).toMatch(/item_reference/);
  });
});

describe("the chat request that continues a response", () => {
  it("renders the same conversation: instructions, items, calls grouped, tools in the template's shape", () => {
    const tool = { type: "function", name: "read", parameters: { type: "object" } };
    const chat = responsesAsChat({
      model: "m",
      instructions: "Be brief.",
      input: [
        {
          role: "user",
          content: [
            { type: "input_text", text: "a" },
            { type: "input_text", text: "b" },
          ],
        },
        { type: "function_call", call_id: "c1", name: "read", arguments: "{}" },
        { type: "function_call", call_id: "c2", namespace: "fs", name: "stat", arguments: "{}" },
        { type: "function_call_output", call_id: "c1", output: "one" },
        { type: "reasoning", summary: [] },
      ],
      tools: [tool],
      tool_choice: { type: "function", name: "read" },
      max_output_tokens: 50,
      temperature: 0,
      store: false,
      text: { format: { type: "text" } },
    });
    expect(chat).toEqual({
      model: "m",
      temperature: 0,
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "a\nb" },
        {
          role: "assistant",
          content: "",
          tool_calls: [
            { id: "c1", type: "function", function: { name: "read", arguments: "{}" } },
            { id: "c2", type: "function", function: { name: "fs__stat", arguments: "{}" } },
          ],
        },
        { role: "tool", tool_call_id: "c1", content: "one" },
      ],
      tools: [{ type: "function", function: tool }],
      tool_choice: { type: "function", function: { name: "read" } },
      max_tokens: 50,
      stream: true,
      stream_options: { include_usage: true },
    });
    // tool_choice none offers no tools (the engine's Responses path renders none).
    expect(responsesAsChat({ input: "x", tools: [tool], tool_choice: "none" })["tools"]).toBeUndefined();
    // The limit is max_output_tokens (where the budget's clamp is written too); max_tokens is no Responses field.
    expect(responsesAsChat({ input: "x", max_output_tokens: 50, max_tokens: 20 })["max_tokens"]).toBe(50);
  });

  it("the answer so far is the open final assistant message; max_tokens less the tokens relayed", () => {
    const transcript = new ResponsesTranscript();
    transcript.record(parseEvents(textSoFar(["Hel", "lo"])));
    const first = Buffer.from(
      JSON.stringify({ model: "m", input: "hi", max_output_tokens: 10, stream: true }),
    );
    const body = JSON.parse(continuationBody("responses", first, transcript).toString()) as Record<
      string,
      unknown
    >;
    expect(body["messages"]).toEqual([
      { role: "user", content: "hi" },
      { role: "assistant", content: "Hello" },
    ]);
    expect(body).toMatchObject({ continue_final_message: true, add_generation_prompt: false, max_tokens: 8 });
    expect(body["input"]).toBeUndefined();
  });
});

describe("splicing a chat continuation into a Responses stream", () => {
  it("text goes on in the open part; sequence numbers go on; the created response is completed with usage", () => {
    const transcript = new ResponsesTranscript();
    transcript.record(parseEvents(textSoFar(["Hel", "lo"])));
    expect(transcript.lastSequence).toBe(5);
    const relay = new ResponsesSpliceRelay(transcript, undefined, { backendId: "e2", meta: META });
    const engine = [
      chatChunk({ role: "assistant", content: "" }),
      chatChunk({ content: " wor" }),
      chatChunk({ content: "ld" }),
      chatChunk({}, "stop"),
      usageChunk(12, 2),
      "data: [DONE]\n\n",
    ].join("");
    const out = pushAll(relay, engine);
    const events = sent(out);
    expect(events.map((e) => e["type"])).toEqual([
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events.map((e) => e["sequence_number"])).toEqual([6, 7, 8, 9, 10, 11]);
    expect(events[0]).toMatchObject({ item_id: "msg_1", output_index: 0, content_index: 0, delta: " wor" });
    expect(events[2]).toMatchObject({ text: "Hello world" });
    const completed = events[5]!;
    expect(completed["x_agent_serve"]).toEqual(META);
    expect(completed["response"]).toMatchObject({
      id: "resp_abc",
      status: "completed",
      output: [{ id: "msg_1", type: "message", status: "completed", content: [{ text: "Hello world" }] }],
      // The engine counted the 2 relayed tokens as prompt; the client's answer counts them as output.
      usage: { input_tokens: 10, output_tokens: 4, total_tokens: 14 },
    });
    expect(relay.complete).toBe(true);
    expect(relay.usage).toEqual({ promptTokens: 10, completionTokens: 4, cachedTokens: 0 });
  });

  it("a second break: the transcript has the spliced events too, and the next splice goes on after them", () => {
    const transcript = new ResponsesTranscript();
    transcript.record(parseEvents(textSoFar(["Hel"])));
    const first = new ResponsesSpliceRelay(transcript, undefined, { backendId: "e2", meta: META });
    transcript.record(parseEvents(pushAll(first, chatChunk({ content: "lo" }))));
    expect(transcript.text).toBe("Hello");
    const second = new ResponsesSpliceRelay(transcript, undefined, { backendId: "e3", meta: META });
    const events = sent(pushAll(second, chatChunk({ content: "!" }, "length") + "data: [DONE]\n\n"));
    expect(events[0]).toMatchObject({ type: "response.output_text.delta", sequence_number: 6, delta: "!" });
    expect(events.at(-1)).toMatchObject({
      type: "response.completed",
      response: { status: "incomplete", incomplete_details: { reason: "max_output_tokens" } },
    });
  });

  it("a function call cut halfway is restarted: only what extends it goes on, under its item; new calls follow", () => {
    const call = {
      id: "fc_1",
      type: "function_call",
      call_id: "c1",
      name: "stat",
      namespace: "fs",
      arguments: "",
    };
    const transcript = callSoFar(call, '{"pa');
    expect(transcript.text).toBe("");
    const restorer = new CallRestorer(
      new Map([["fs__stat", { namespace: "fs", name: "stat" }]]),
      [],
      undefined,
    );
    const relay = new ResponsesSpliceRelay(transcript, restorer, { backendId: "e2", meta: META });
    const engine = [
      chatChunk({ tool_calls: [{ index: 0, id: "x", type: "function", function: { name: "fs__stat" } }] }),
      chatChunk({ tool_calls: [{ index: 0, function: { arguments: '{"pa' } }] }),
      chatChunk({ tool_calls: [{ index: 0, function: { arguments: 'th": 1}' } }] }),
      chatChunk({ tool_calls: [{ index: 1, id: "y", type: "function", function: { name: "fs__stat" } }] }),
      chatChunk({ tool_calls: [{ index: 1, function: { arguments: "{}" } }] }),
      chatChunk({}, "tool_calls"),
      "data: [DONE]\n\n",
    ].join("");
    const events = sent(pushAll(relay, engine));
    expect(events.map((e) => e["type"])).toEqual([
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events[0]).toMatchObject({ item_id: "fc_1", output_index: 0, delta: 'th": 1}' });
    expect(events[1]).toMatchObject({ arguments: '{"path": 1}', name: "stat" });
    // The new call's item is named as the client names it (the adaptation's restorer).
    expect(events[3]).toMatchObject({
      output_index: 1,
      item: { call_id: "y", name: "stat", namespace: "fs" },
    });
    const response = events.at(-1)!["response"] as { output: Record<string, unknown>[] };
    expect(response.output).toMatchObject([
      {
        id: "fc_1",
        call_id: "c1",
        name: "stat",
        namespace: "fs",
        arguments: '{"path": 1}',
        status: "completed",
      },
      { call_id: "y", name: "stat", namespace: "fs", arguments: "{}" },
    ]);
  });

  it("a regenerated call that differs from the part relayed stops the stream (not the engine's fault)", () => {
    const call = { id: "fc_1", type: "function_call", call_id: "c1", name: "read", arguments: "" };
    const transcript = callSoFar(call, '{"a');
    const relay = new ResponsesSpliceRelay(transcript, undefined, { backendId: "e2", meta: META });
    const out = pushAll(
      relay,
      chatChunk({
        tool_calls: [{ index: 0, id: "x", type: "function", function: { name: "read", arguments: '{"b' } }],
      }),
    );
    expect(out).toBe("");
    expect(relay.stopped).toMatchObject({ engineFault: false });
    expect(relay.stopped?.message).toMatch(/differ from the part relayed/);
  });

  it("an error chunk from the continuing engine stops the stream as the engine's fault; the error event goes on numbering", () => {
    const transcript = new ResponsesTranscript();
    transcript.record(parseEvents(textSoFar(["Hi"])));
    const relay = new ResponsesSpliceRelay(transcript, undefined, { backendId: "e2", meta: META });
    pushAll(relay, `data: ${JSON.stringify({ error: { message: "boom" } })}\n\n`);
    expect(relay.stopped).toMatchObject({ engineFault: true });
    const [ending] = sent(Buffer.concat(relay.errorEnding("gone", "upstream_error")).toString());
    expect(ending).toMatchObject({
      type: "error",
      code: "upstream_error",
      message: "gone",
      sequence_number: 5,
    });
  });

  it("what rules a continuation out once relayed: reasoning, a refusal part, the end of the answer", () => {
    const reasoning = new ResponsesTranscript();
    reasoning.record(parseEvents(responsesEvents([["response.reasoning_text.delta", { delta: "hm" }]])));
    expect(reasoning.blocker).toMatch(/reasoning/);
    const ended = new ResponsesTranscript();
    ended.record(
      parseEvents(textSoFar(["a"]) + responsesEvents([["response.completed", { response: RESPONSE }]], 5)),
    );
    expect(ended.blocker).toMatch(/ended/);
    const refusal = new ResponsesTranscript();
    refusal.record(
      parseEvents(
        responsesEvents([
          ["response.output_item.added", { output_index: 0, item: MESSAGE }],
          [
            "response.content_part.added",
            { item_id: "msg_1", output_index: 0, content_index: 0, part: { type: "refusal" } },
          ],
        ]),
      ),
    );
    expect(refusal.blocker).toMatch(/refusal/);
  });
});
