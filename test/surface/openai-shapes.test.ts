// SSE chunks are assembled from precomputed fragments: they must be byte for byte what JSON.stringify would give
// for vLLM's chunk objects (same keys, same order), whatever the text, id or model contain.
import { describe, expect, it } from "vitest";
import { SseChunks, usage } from "../../src/surface/openai-shapes.js";

const IDENTITY = { id: 'chatcmpl-"quoted"\\', created: 1_764_682_000, model: "Qwén/m\u2028odel" };
const TEXTS = [" the", "", 'a"b\\', "é\n\t", "\u0001"];
const REASONS = [null, "stop", "length", "abort"] as const;

function event(value: unknown): string {
  return `data: ${JSON.stringify(value)}\n\n`;
}

function chatChunk(index: number, text: string, reason: (typeof REASONS)[number]): string {
  const delta = text.length > 0 || reason === null ? { content: text } : {};
  const choice =
    reason === null
      ? { index, delta, logprobs: null, finish_reason: null }
      : { index, delta, logprobs: null, finish_reason: reason, stop_reason: null };
  const { id, created, model } = IDENTITY;
  return event({ id, object: "chat.completion.chunk", created, model, choices: [choice] });
}

function completionChunk(index: number, text: string, reason: (typeof REASONS)[number]): string {
  const choice =
    reason === null
      ? { index, text, logprobs: null, finish_reason: null }
      : { index, text, logprobs: null, finish_reason: reason, stop_reason: null };
  const { id, created, model } = IDENTITY;
  return event({ id, object: "text_completion", created, model, choices: [choice] });
}

describe("SseChunks", () => {
  it("builds chat deltas exactly as JSON.stringify of vLLM's chunk", () => {
    const sse = new SseChunks(IDENTITY, "chat", 3);
    for (const index of [0, 2]) {
      for (const text of TEXTS) {
        for (const reason of REASONS)
          expect(sse.delta(index, text, reason)).toBe(chatChunk(index, text, reason));
      }
    }
    const { id, created, model } = IDENTITY;
    expect(sse.role(1)).toBe(
      event({
        id,
        object: "chat.completion.chunk",
        created,
        model,
        choices: [
          { index: 1, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null },
        ],
      }),
    );
    const totals = usage(10, 3, 4);
    expect(sse.usage(totals)).toBe(
      event({ id, object: "chat.completion.chunk", created, model, choices: [], usage: totals }),
    );
  });

  it("builds completion chunks exactly as JSON.stringify of vLLM's chunk", () => {
    const sse = new SseChunks(IDENTITY, "completion", 2);
    for (const index of [0, 1]) {
      for (const text of TEXTS) {
        for (const reason of REASONS) {
          expect(sse.delta(index, text, reason)).toBe(completionChunk(index, text, reason));
        }
      }
    }
  });
});
