// Receipts on every API the gateway relays, streamed and not: chat streams carry it on their usage chunk, Messages
// streams on message_delta, the Responses API on its final event and follows a chain by previous_response_id.
import { EventEmitter } from "node:events";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SMALL_MODEL, startCluster, type Cluster } from "../helpers/cluster.js";
import { eventsOf, waitUntil } from "../helpers/wait.js";
import { SYSTEM, extend, reusableOf, tokensOf, turn, type Message } from "./helpers.js";

let cluster: Cluster;
/** The gateway's log lines (JSON), as an operator reads them. */
const logLines: Record<string, unknown>[] = [];
const logged = new EventEmitter();
beforeAll(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n"))
        if (line !== "") logLines.push(JSON.parse(line) as Record<string, unknown>);
      logged.emit("line");
      done();
    },
  });
  cluster = await startCluster(
    [
      { id: "small-0", tier: "small" },
      { id: "small-1", tier: "small" },
    ],
    {},
    { logger: pino({ level: "info" }, sink) },
  );
});
afterAll(() => cluster.close());

/** The JSON payloads of an SSE body's data lines (`[DONE]` aside). */
function events(text: string): Record<string, unknown>[] {
  return text
    .split("\n")
    .filter((line) => line.startsWith("data: ") && line !== "data: [DONE]")
    .map((line) => JSON.parse(line.slice(6)) as Record<string, unknown>);
}

async function post(
  path: string,
  session: string,
  body: object,
): Promise<{ headers: Headers; text: string }> {
  const response = await fetch(`${cluster.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": session },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  expect(response.status, text).toBe(200);
  return { headers: response.headers, text };
}

describe("receipts across APIs", () => {
  it("a chat stream that asked for usage gets the receipt on its usage chunk, not in its headers", async () => {
    const first: Message[] = [SYSTEM, { role: "user", content: "Stream me the plan." }];
    const one = await turn(cluster.url, "chat-stream", first);
    const { headers, text } = await post("/v1/chat/completions", "chat-stream", {
      model: SMALL_MODEL,
      messages: extend(first, one, "Go on."),
      max_tokens: 8,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(headers.get("x-agent-serve-lost-cause")).toBeNull();
    const usageChunk = events(text).find((e) => e["usage"] !== undefined && e["usage"] !== null)!;
    const cached = (usageChunk["usage"] as { prompt_tokens_details: { cached_tokens: number } })
      .prompt_tokens_details.cached_tokens;
    // The whole metadata again, with the receipt.
    // The request's log line has it too (written once the answer has ended).
    const lines = () => logLines.filter((l) => l["msg"] === "request" && l["session"] === "chat-stream");
    await waitUntil("both turns' log lines", () => lines().length === 2, eventsOf(logged, "line"));
    expect(lines().map((l) => l["lostCause"])).toEqual(["new_session", "none"]);
    expect(lines()[1]).toMatchObject({ reusable: reusableOf(tokensOf(one)), lost: 0 });
    expect(usageChunk["x_agent_serve"]).toMatchObject({
      backend_id: one.backend,
      reusable_tokens: reusableOf(tokensOf(one)),
      cached_tokens: cached,
      lost_tokens: 0,
      lost_cause: "none",
    });
  });

  it("a Messages stream gets the receipt on message_delta; a string and a text block hash alike", async () => {
    const request = (messages: object[], stream: boolean) => ({
      model: SMALL_MODEL,
      max_tokens: 8,
      system: "You are a careful coding agent.",
      messages,
      stream,
    });
    const first = [{ role: "user", content: "fix the failing test" }];
    const { text } = await post("/v1/messages", "messages", request(first, false));
    const reply = JSON.parse(text) as {
      content: object[];
      usage: { input_tokens: number; output_tokens: number; cache_read_input_tokens: number };
      x_agent_serve: { lost_cause: string };
    };
    expect(reply.x_agent_serve.lost_cause).toBe("new_session");
    const tokens = reply.usage.input_tokens + reply.usage.cache_read_input_tokens + reply.usage.output_tokens;
    // The client sends its first message back as a text block with a cache mark, as Claude Code does.
    const second = [
      {
        role: "user",
        content: [{ type: "text", text: "fix the failing test", cache_control: { type: "ephemeral" } }],
      },
      { role: "assistant", content: reply.content },
      { role: "user", content: "and run it" },
    ];
    const streamed = await post("/v1/messages", "messages", request(second, true));
    const delta = events(streamed.text).find((e) => e["type"] === "message_delta")!;
    expect(delta["x_agent_serve"]).toMatchObject({
      reusable_tokens: reusableOf(tokens),
      lost_tokens: 0,
      lost_cause: "none",
    });
  });

  it("a Responses chain is receipted by previous_response_id, streamed on its final event", async () => {
    const { text } = await post("/v1/responses", "responses", {
      model: SMALL_MODEL,
      input: "hello",
      max_output_tokens: 8,
    });
    const first = JSON.parse(text) as {
      id: string;
      usage: { input_tokens: number; output_tokens: number };
      x_agent_serve: { lost_cause: string };
    };
    expect(first.x_agent_serve.lost_cause).toBe("new_session");
    const streamed = await post("/v1/responses", "responses", {
      model: SMALL_MODEL,
      input: "and then?",
      previous_response_id: first.id,
      max_output_tokens: 8,
      stream: true,
    });
    const final = events(streamed.text).find((e) => e["type"] === "response.completed")!;
    expect(final["x_agent_serve"]).toMatchObject({
      reusable_tokens: reusableOf(first.usage.input_tokens + first.usage.output_tokens),
      lost_tokens: 0,
      lost_cause: "none",
    });
  });

  it("a request without a session id is receipted against its prompt prefix key's previous request", async () => {
    const first: Message[] = [SYSTEM, { role: "user", content: "No session header here." }];
    const one = await turn(cluster.url, undefined, first);
    expect(one.receipt.lost_cause).toBe("new_session");
    const two = await turn(cluster.url, undefined, extend(first, one, "Still none."));
    expect(two.backend).toBe(one.backend); // placed by the prefix key, like the first
    expect(two.receipt).toMatchObject({
      reusable_tokens: reusableOf(tokensOf(one)),
      lost_tokens: 0,
      lost_cause: "none",
    });
    // Another conversation under the same prefix key: nothing of the previous one is reusable.
    const other = await turn(cluster.url, undefined, [
      SYSTEM,
      { role: "user", content: "A different task." },
    ]);
    expect(other.receipt).toMatchObject({ reusable_tokens: 0, lost_cause: "conversation_changed" });
  });
});
