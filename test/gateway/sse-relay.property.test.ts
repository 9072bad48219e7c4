// The SSE relay against a plain model of what it must do, for any way the engine's bytes are split into reads.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { split } from "../helpers/split.js";
import { SseRelay } from "../../src/gateway/sse-relay.js";

const MEMBER = ',"x_agent_serve":{"tier":"small"}';

/** The model: the metadata member goes last into the first event's JSON object, if that event has one. */
function withMetadataOnFirst(events: string[]): string {
  const [first, ...rest] = events;
  if (first === undefined) return "";
  const spliced = first.replace(/}\n\n$/, `${MEMBER}}\n\n`);
  return [spliced, ...rest].join("");
}

interface Usage {
  prompt: number;
  completion: number;
}

/** A token chunk; with `usage` when the engine reports usage on every chunk (vLLM's continuous_usage_stats). */
function tokenEvent(text: string, usage?: Usage): string {
  const chunk = { object: "chat.completion.chunk", choices: [{ delta: { content: text } }] };
  const payload =
    usage === undefined
      ? chunk
      : { ...chunk, usage: { prompt_tokens: usage.prompt, completion_tokens: usage.completion } };
  return `data: ${JSON.stringify(payload)}\n\n`;
}

function usageEvent(prompt: number, completion: number): string {
  return `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: prompt, completion_tokens: completion } })}\n\n`;
}

function relay(parts: Buffer[], stripUsage: boolean): { out: string; relay: SseRelay } {
  const r = new SseRelay(Buffer.from(MEMBER), stripUsage);
  const out = [...parts.flatMap((p) => r.push(p)), ...r.flush()];
  return { out: Buffer.concat(out).toString(), relay: r };
}

const usageShape = fc.record({ prompt: fc.nat(5000), completion: fc.nat(5000) });
const streamShape = fc.record({
  // Token texts include the markers the relay looks for, to show that only whole events are judged.
  tokens: fc.array(
    fc.record({
      text: fc.oneof(fc.string(), fc.constant('"usage":{'), fc.constant("data: [DONE]")),
      usage: fc.option(usageShape, { nil: undefined }),
    }),
    { maxLength: 12 },
  ),
  usage: fc.option(usageShape, { nil: undefined }),
  cuts: fc.array(fc.nat(), { maxLength: 10 }),
  stripUsage: fc.boolean(),
});

describe("SseRelay", () => {
  it("forwards every event, puts the metadata on the first chunk and reads the usage, however split", () => {
    fc.assert(
      fc.property(streamShape, ({ tokens, usage, cuts, stripUsage }) => {
        const events = tokens.map((t) => tokenEvent(t.text, t.usage));
        const usageText = usage === undefined ? "" : usageEvent(usage.prompt, usage.completion);
        const input = Buffer.from(`${events.join("")}${usageText}data: [DONE]\n\n`);
        const { out, relay: r } = relay(split(input, cuts), stripUsage);
        const kept = [...events, ...(stripUsage || usage === undefined ? [] : [usageText])];
        // No chunk is added: the metadata rides on the engine's first chunk (the usage chunk if it is the only
        // one the client gets), and a stream of no chunk at all carries it only in the headers.
        expect(out).toBe(`${withMetadataOnFirst(kept)}data: [DONE]\n\n`);
        expect(r.complete).toBe(true);
        // The last report wins: the usage-only chunk, else the last token chunk that carried usage.
        const last = usage ?? tokens.findLast((t) => t.usage !== undefined)?.usage;
        expect(r.usage).toEqual(
          last === undefined
            ? undefined
            : { promptTokens: last.prompt, completionTokens: last.completion, cachedTokens: 0 },
        );
      }),
      { numRuns: 300 },
    );
  });

  it("passes a stream without [DONE] through as it came, holding back nothing at the end", () => {
    fc.assert(
      fc.property(
        fc.array(fc.string(), { maxLength: 8 }),
        fc.string(),
        fc.array(fc.nat()),
        (tokens, tail, cuts) => {
          // A partial last event: no blank line in it.
          const input = Buffer.from(tokens.map((t) => tokenEvent(t)).join("") + tail.replaceAll("\n", " "));
          const { out, relay: r } = relay(split(input, cuts), true);
          const events = tokens.map((t) => tokenEvent(t));
          expect(out).toBe(withMetadataOnFirst(events) + tail.replaceAll("\n", " "));
          expect(r.complete).toBe(false);
        },
      ),
      { numRuns: 200 },
    );
  });
});
