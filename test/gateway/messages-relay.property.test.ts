// The Anthropic event-stream relay gives the same bytes and usage however the engine's stream is split.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MessagesRelay } from "../../src/gateway/messages-relay.js";

const MEMBER = Buffer.from(',"x_agent_serve":{"backend_id":"small-0"}');
const STREAM = Buffer.from(
  'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","content":[],' +
    '"usage":{"input_tokens":5,"cache_read_input_tokens":20,"cache_creation_input_tokens":0,"output_tokens":0}}}\n\n' +
    'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n' +
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"héllo"}}\n\n' +
    'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" you"}}\n\n' +
    'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n' +
    'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}\n\n' +
    'event: message_stop\ndata: {"type":"message_stop"}\n\n',
);

function relay(parts: Buffer[]): { text: string; relay: MessagesRelay } {
  const r = new MessagesRelay(MEMBER);
  const out: Buffer[] = [];
  for (const part of parts) out.push(...r.push(part));
  out.push(...r.flush());
  return { text: Buffer.concat(out).toString("utf8"), relay: r };
}

describe("MessagesRelay", () => {
  it("puts x_agent_serve on message_start's message, reads the usage, counts deltas, sees the end", () => {
    const { text, relay: r } = relay([STREAM]);
    expect(text).toContain('"x_agent_serve":{"backend_id":"small-0"}}}');
    expect(text.replace(MEMBER.toString(), "")).toBe(STREAM.toString());
    expect(r.usage).toEqual({ promptTokens: 25, completionTokens: 2, cachedTokens: 20 });
    expect(r.generatedEvents).toBe(2);
    expect(r.complete).toBe(true);
  });

  it("gives the same bytes and usage for every split of the engine's bytes (property)", () => {
    const whole = relay([STREAM]);
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.integer({ min: 1, max: STREAM.length - 1 }), { maxLength: 12 }),
        (cuts) => {
          const points = [0, ...cuts.sort((a, b) => a - b), STREAM.length];
          const parts = points.slice(1).map((end, i) => STREAM.subarray(points[i], end));
          const split = relay(parts);
          expect(split.text).toBe(whole.text);
          expect(split.relay.usage).toEqual(whole.relay.usage);
          expect(split.relay.generatedEvents).toBe(2);
        },
      ),
    );
  });

  it("ends a cut stream with an error event in Anthropic's shape", () => {
    const [ending] = new MessagesRelay(MEMBER).errorEnding("engine went away");
    expect(ending!.toString()).toBe(
      'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"engine went away"}}\n\n',
    );
  });
});
