// The pure parts of stream continuation, without sockets: what the transcript records, the continuation request
// per API, and the splicing of the next engine's events into the client's stream.
import { describe, expect, it } from "vitest";
import { continuationBody } from "../../../src/gateway/continuation/continuation-body.js";
import { continuationBlocker } from "../../../src/gateway/continuation/eligibility.js";
import { MessagesSpliceRelay } from "../../../src/gateway/continuation/messages-splice.js";
import { OpenAiSpliceRelay } from "../../../src/gateway/continuation/openai-splice.js";
import { RecordingRelay } from "../../../src/gateway/continuation/recording-relay.js";
import { parseEvents } from "../../../src/gateway/continuation/sse-events.js";
import { MessagesTranscript, OpenAiTranscript } from "../../../src/gateway/continuation/transcript.js";
import { SseRelay } from "../../../src/gateway/sse-relay.js";
import { pushAll } from "./relay-bytes.js";

const META = { backend_id: "e2", migrated: { from: ["e1"], cause: "cut", tool_call: "none" } };
const SETTINGS = { enabled: true, maxContinuations: 2, exceptTiers: new Set<string>() };

function chatChunk(delta: object, extra: object = {}): string {
  return `data: ${JSON.stringify({ id: "chatcmpl-1", object: "chat.completion.chunk", created: 7, model: "m", choices: [{ index: 0, delta, finish_reason: null }], ...extra })}\n\n`;
}

function recorded(text: string, transcript: OpenAiTranscript | MessagesTranscript): void {
  transcript.record(parseEvents(text));
}

function sent(text: string): Record<string, unknown>[] {
  return parseEvents(text)
    .filter((e) => e.data !== "[DONE]")
    .map((e) => JSON.parse(e.data) as Record<string, unknown>);
}

describe("continuation requests", () => {
  it("chat: the answer so far as a final assistant message with continue_final_message, max_tokens lowered", () => {
    const transcript = new OpenAiTranscript("chat");
    recorded(
      chatChunk({ role: "assistant", content: "" }) +
        chatChunk({ content: " the" }) +
        chatChunk({ content: " day" }),
      transcript,
    );
    const first = Buffer.from(
      JSON.stringify({
        model: "m2",
        messages: [{ role: "user", content: "hi" }],
        max_tokens: 10,
        stream: true,
      }),
    );
    expect(JSON.parse(continuationBody("chat", first, transcript).toString())).toEqual({
      model: "m2",
      messages: [
        { role: "user", content: "hi" },
        { role: "assistant", content: " the day" },
      ],
      max_tokens: 8,
      stream: true,
      continue_final_message: true,
      add_generation_prompt: false,
    });
  });

  it("chat: a client's own continued message is extended, not followed", () => {
    const transcript = new OpenAiTranscript("chat");
    recorded(chatChunk({ content: " more" }), transcript);
    const first = Buffer.from(
      JSON.stringify({
        messages: [
          { role: "user", content: "q" },
          { role: "assistant", content: "A:" },
        ],
        continue_final_message: true,
        add_generation_prompt: false,
      }),
    );
    const body = JSON.parse(continuationBody("chat", first, transcript).toString()) as {
      messages: unknown[];
    };
    expect(body.messages).toEqual([
      { role: "user", content: "q" },
      { role: "assistant", content: "A: more" },
    ]);
  });

  it("Messages: a trailing assistant text block (a prefill); completions: prompt + text", () => {
    const messages = new MessagesTranscript();
    recorded(
      'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":5}}}\n\n' +
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n' +
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}\n\n',
      messages,
    );
    const first = Buffer.from(JSON.stringify({ messages: [{ role: "user", content: "q" }], max_tokens: 5 }));
    expect(JSON.parse(continuationBody("messages", first, messages).toString())).toEqual({
      messages: [
        { role: "user", content: "q" },
        { role: "assistant", content: [{ type: "text", text: "Hel" }] },
      ],
      max_tokens: 4,
    });
    const completions = new OpenAiTranscript("completions");
    recorded(
      `data: ${JSON.stringify({ id: "c", choices: [{ index: 0, text: " upon", finish_reason: null }] })}\n\n`,
      completions,
    );
    const prompt = Buffer.from(JSON.stringify({ prompt: ["Once"], max_tokens: 1 }));
    expect(JSON.parse(continuationBody("completions", prompt, completions).toString())).toEqual({
      prompt: ["Once upon"],
      max_tokens: 1,
    });
  });

  it("a cut inside the first tool call, with no text before it, sends the first request again", () => {
    const transcript = new OpenAiTranscript("chat");
    recorded(
      chatChunk({
        tool_calls: [
          { index: 0, id: "call_1", type: "function", function: { name: "f", arguments: '{"a"' } },
        ],
      }),
      transcript,
    );
    const first = Buffer.from('{"messages":[]}');
    expect(continuationBody("chat", first, transcript)).toBe(first);
  });

  it("says why a request cannot be continued", () => {
    expect(continuationBlocker("chat", {}, "t", SETTINGS)).toBeUndefined();
    expect(
      continuationBlocker(
        "chat",
        { n: 1, logprobs: false, response_format: { type: "text" } },
        "t",
        SETTINGS,
      ),
    ).toBeUndefined();
    expect(continuationBlocker("chat", { n: 3 }, "t", SETTINGS)).toMatch(/n > 1/);
    expect(continuationBlocker("chat", { top_logprobs: 2 }, "t", SETTINGS)).toMatch(/top_logprobs/);
    expect(continuationBlocker("chat", { response_format: { type: "json_object" } }, "t", SETTINGS)).toMatch(
      /guided/,
    );
    expect(continuationBlocker("chat", { guided_regex: "a+" }, "t", SETTINGS)).toMatch(/guided_regex/);
    expect(continuationBlocker("chat", { return_token_ids: true }, "t", SETTINGS)).toMatch(
      /return_token_ids/,
    );
    expect(
      continuationBlocker("completions", { prompt: "p", return_token_ids: true }, "t", SETTINGS),
    ).toMatch(/return_token_ids/);
    expect(continuationBlocker("chat", { return_token_ids: false }, "t", SETTINGS)).toBeUndefined();
    expect(continuationBlocker("completions", { prompt: [1, 2, 3] }, "t", SETTINGS)).toMatch(/prompt/);
    expect(
      continuationBlocker("responses", { input: "hi", previous_response_id: "r" }, "t", SETTINGS),
    ).toMatch(/previous_response_id/);
    expect(continuationBlocker("chat", {}, "big", { ...SETTINGS, exceptTiers: new Set(["big"]) })).toMatch(
      /except_tiers/,
    );
  });
});

describe("splicing a chat continuation", () => {
  it("keeps the client's id, created and model; drops the role chunk; rebases usage; puts x_agent_serve on the finish", () => {
    const transcript = new OpenAiTranscript("chat");
    recorded(
      chatChunk({ role: "assistant", content: "" }, { system_fingerprint: "fp" }) +
        chatChunk({ content: " a" }) +
        chatChunk({ content: " b" }),
      transcript,
    );
    const relay = new OpenAiSpliceRelay(transcript, "chat", false, { backendId: "e2", meta: META });
    const engine2 = (delta: object, finish: string | null = null, extra: object = {}) =>
      `data: ${JSON.stringify({ id: "chatcmpl-2", created: 9, model: "m2", choices: [{ index: 0, delta, finish_reason: finish }], ...extra })}\n\n`;
    const out = pushAll(
      relay,
      engine2({ role: "assistant", content: "" }) +
        engine2({ content: " c" }) +
        engine2({}, "stop") +
        `data: ${JSON.stringify({ id: "chatcmpl-2", created: 9, model: "m2", choices: [], usage: { prompt_tokens: 12, completion_tokens: 2, total_tokens: 14 } })}\n\n` +
        "data: [DONE]\n\n",
    );
    const chunks = sent(out);
    expect(chunks).toHaveLength(3);
    for (const chunk of chunks)
      expect(chunk).toMatchObject({ id: "chatcmpl-1", created: 7, model: "m", system_fingerprint: "fp" });
    expect(chunks[0]).toMatchObject({ choices: [{ delta: { content: " c" } }] });
    expect(chunks[1]).toMatchObject({ choices: [{ finish_reason: "stop" }], x_agent_serve: META });
    expect(chunks[2]!["usage"]).toEqual({ prompt_tokens: 10, completion_tokens: 4, total_tokens: 14 });
    expect(out.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(relay.complete).toBe(true);
    expect(relay.usage).toEqual({ promptTokens: 10, completionTokens: 4, cachedTokens: 0 });
  });

  it("a cut tool call is restarted: only what extends the relayed arguments goes on, under the same index", () => {
    const transcript = new OpenAiTranscript("chat");
    recorded(
      chatChunk({
        tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "f", arguments: "" } }],
      }) + chatChunk({ tool_calls: [{ index: 0, function: { arguments: '{"path": "a' } }] }),
      transcript,
    );
    const relay = new OpenAiSpliceRelay(transcript, "chat", true, { backendId: "e2", meta: META });
    const call = (fn: object, extra: object = {}) =>
      chatChunk({ tool_calls: [{ index: 0, ...extra, function: fn }] });
    const out = pushAll(
      relay,
      call({ name: "f", arguments: "" }, { id: "call_9", type: "function" }) +
        call({ arguments: '{"pa' }) +
        call({ arguments: 'th": "ab' }) +
        call({ arguments: 'c"}' }) +
        `data: ${JSON.stringify({ id: "x", choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] })}\n\n` +
        "data: [DONE]\n\n",
      5,
    );
    const deltas = sent(out).map(
      (c) => (c["choices"] as { delta: { tool_calls?: unknown } }[])[0]!.delta.tool_calls,
    );
    expect(deltas.filter((d) => d !== undefined)).toEqual([
      [{ index: 0, function: { arguments: "b" } }],
      [{ index: 0, function: { arguments: 'c"}' } }],
    ]);
    expect(relay.stopped).toBeUndefined();
  });

  it("a regenerated call that disagrees with the part relayed stops the stream, saying so", () => {
    const transcript = new OpenAiTranscript("chat");
    recorded(
      chatChunk({
        tool_calls: [
          { index: 0, id: "call_1", type: "function", function: { name: "f", arguments: '{"a": 1' } },
        ],
      }),
      transcript,
    );
    const relay = new OpenAiSpliceRelay(transcript, "chat", true, { backendId: "e2", meta: META });
    relay.push(
      Buffer.from(
        chatChunk({
          tool_calls: [
            { index: 0, id: "c", type: "function", function: { name: "f", arguments: '{"a": 2' } },
          ],
        }),
      ),
    );
    expect(relay.stopped).toMatchObject({ engineFault: false });
    expect(relay.stopped!.message).toMatch(/differ from the part relayed; the answer is incomplete/);
    expect(relay.push(Buffer.from("data: [DONE]\n\n"))).toEqual([]);
  });
});

describe("splicing a Messages continuation", () => {
  const event = (name: string, data: object) =>
    `event: ${name}\ndata: ${JSON.stringify({ type: name, ...data })}\n\n`;

  it("text goes on in the client's open block; message_start is dropped; output usage counts the prefill", () => {
    const transcript = new MessagesTranscript();
    recorded(
      event("message_start", {
        message: { id: "msg_1", usage: { input_tokens: 3, cache_read_input_tokens: 4 } },
      }) +
        event("content_block_start", { index: 0, content_block: { type: "text", text: "" } }) +
        event("content_block_delta", { index: 0, delta: { type: "text_delta", text: "ab" } }),
      transcript,
    );
    const relay = new MessagesSpliceRelay(transcript, { backendId: "e2", meta: META });
    const out = pushAll(
      relay,
      event("message_start", { message: { id: "msg_2", usage: { input_tokens: 9 } } }) +
        event("content_block_start", { index: 0, content_block: { type: "text", text: "" } }) +
        event("content_block_delta", { index: 0, delta: { type: "text_delta", text: "cd" } }) +
        event("content_block_stop", { index: 0 }) +
        event("message_delta", { delta: { stop_reason: "end_turn" }, usage: { output_tokens: 1 } }) +
        event("message_stop", {}),
    );
    expect(parseEvents(out).map((e) => e.name)).toEqual([
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    const delta = sent(out)[2]!;
    expect(delta["usage"]).toEqual({ output_tokens: 2 });
    expect(delta["x_agent_serve"]).toEqual(META);
    expect(relay.usage).toEqual({ promptTokens: 7, completionTokens: 2, cachedTokens: 4 });
  });

  it("a tool_use cut inside its input: restarted under the client's index; a new block takes the next index", () => {
    const transcript = new MessagesTranscript();
    recorded(
      event("message_start", { message: { id: "msg_1", usage: { input_tokens: 3 } } }) +
        event("content_block_start", { index: 0, content_block: { type: "text", text: "" } }) +
        event("content_block_delta", { index: 0, delta: { type: "text_delta", text: "Let me look." } }) +
        event("content_block_stop", { index: 0 }) +
        event("content_block_start", {
          index: 1,
          content_block: { type: "tool_use", id: "toolu_1", name: "read", input: {} },
        }) +
        event("content_block_delta", { index: 1, delta: { type: "input_json_delta", partial_json: '{"pa' } }),
      transcript,
    );
    const relay = new MessagesSpliceRelay(transcript, { backendId: "e2", meta: META });
    const out = pushAll(
      relay,
      event("content_block_start", {
        index: 0,
        content_block: { type: "tool_use", id: "toolu_9", name: "read", input: {} },
      }) +
        event("content_block_delta", {
          index: 0,
          delta: { type: "input_json_delta", partial_json: '{"path": "x"}' },
        }) +
        event("content_block_stop", { index: 0 }) +
        event("content_block_start", {
          index: 1,
          content_block: { type: "tool_use", id: "toolu_8", name: "grep", input: {} },
        }) +
        event("content_block_stop", { index: 1 }) +
        event("message_delta", { delta: { stop_reason: "tool_use" }, usage: { output_tokens: 6 } }) +
        event("message_stop", {}),
    );
    const events = parseEvents(out).map((e) => ({
      name: e.name,
      data: JSON.parse(e.data) as Record<string, unknown>,
    }));
    expect(events.map((e) => [e.name, e.data["index"]])).toEqual([
      ["content_block_delta", 1],
      ["content_block_stop", 1],
      ["content_block_start", 2],
      ["content_block_stop", 2],
      ["message_delta", undefined],
      ["message_stop", undefined],
    ]);
    expect(events[0]!.data["delta"]).toEqual({ type: "input_json_delta", partial_json: 'th": "x"}' });
  });
});

describe("recording the first engine's stream", () => {
  it("records the text, and withholds an engine's error event and what follows it", () => {
    const transcript = new OpenAiTranscript("chat");
    const member = Buffer.from(',"x_agent_serve":{"backend_id":"e1"}');
    const relay = new RecordingRelay(new SseRelay(member, false), transcript, "e1");
    const out = pushAll(
      relay,
      chatChunk({ role: "assistant", content: "" }) +
        chatChunk({ content: " one" }) +
        'data: {"error": {"message": "boom", "code": 500}}\n\ndata: [DONE]\n\n',
    );
    expect(out).not.toContain("boom");
    expect(out).not.toContain("[DONE]");
    expect(transcript.text).toBe(" one");
    expect(transcript.textEvents).toBe(1);
    expect(relay.stopped).toEqual({
      message: "backend e1 sent an error event mid-answer: boom",
      code: "upstream_error",
      engineFault: true,
    });
  });

  it("a finished answer, or reasoning relayed, cannot be continued", () => {
    const done = new OpenAiTranscript("chat");
    recorded(
      `data: ${JSON.stringify({ id: "x", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\n`,
      done,
    );
    expect(done.blocker).toMatch(/ended/);
    const reasoning = new OpenAiTranscript("chat");
    recorded(chatChunk({ reasoning_content: "hmm" }), reasoning);
    expect(reasoning.blocker).toMatch(/reasoning/);
  });
});

describe("deciding at the break", () => {
  it("a stream cut after its finish (before [DONE]) is not kept open: nothing is left to continue", async () => {
    const { StreamMigration } = await import("../../../src/gateway/continuation/stream-migration.js");
    const migration = StreamMigration.begin(
      { endpoint: "chat", body: {}, stream: true, stripUsage: true, tier: "t" },
      SETTINGS,
    )!;
    const attempt = migration.attempt();
    const relay = migration.relay(
      () => new SseRelay(Buffer.from(',"x_agent_serve":{}'), true),
      Buffer.from(',"x_agent_serve":{}'),
      undefined,
      "e1",
    );
    relay.push(Buffer.from(chatChunk({ content: " a" })));
    expect(attempt.keepOpenOnBreak()).toBe(true);
    relay.push(
      Buffer.from(
        `data: ${JSON.stringify({ id: "x", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\n`,
      ),
    );
    expect(attempt.keepOpenOnBreak()).toBe(false);
    expect(migration.whyNot).toBe("the answer had ended");
  });
});
