// Natural reply lengths over real HTTP: a reply ends on end-of-turn at a length drawn from the profile's
// distribution, max_tokens only caps it, and vLLM's ignore_eos makes it exactly max_tokens, in every API.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";

let engine: SimEngineHandle;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  engine = await startSimEngine({ profile: "instant", seed: 11 });
  openai = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: "unused", maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: engine.url, apiKey: "unused", maxRetries: 0 });
});
afterAll(async () => {
  await engine.close();
});

const EXACT = { ignore_eos: true } as object;
const prompts = Array.from({ length: 12 }, (_, i) => `Question number ${i}: what changed in this diff?`);

describe("natural reply lengths", () => {
  it("chat: replies under a generous max_tokens stop on their own at varied lengths", async () => {
    const lengths: number[] = [];
    for (const content of prompts) {
      const reply = await openai.chat.completions.create({
        model: engine.model,
        messages: [{ role: "user", content }],
        max_tokens: 4000,
      });
      expect(reply.choices[0]!.finish_reason).toBe("stop");
      const tokens = reply.usage!.completion_tokens;
      // The end-of-turn token is generated and counted, but has no text.
      expect(reply.choices[0]!.message.content).toHaveLength((tokens - 1) * 4);
      lengths.push(tokens);
    }
    // Log-normal around a median of 200 tokens: spread out, never the cap.
    expect(new Set(lengths).size).toBeGreaterThan(8);
    expect(Math.max(...lengths)).toBeLessThan(4000);
  });

  it("chat: a small max_tokens caps the natural length (finish length); ignore_eos makes it exact", async () => {
    const messages = [{ role: "user" as const, content: prompts[0]! }];
    const natural = await openai.chat.completions.create({ model: engine.model, messages, max_tokens: 4000 });
    const naturalTokens = natural.usage!.completion_tokens;
    const capped = await openai.chat.completions.create({
      model: engine.model,
      messages,
      max_tokens: naturalTokens - 1,
    });
    expect(capped.choices[0]!.finish_reason).toBe("length");
    expect(capped.usage!.completion_tokens).toBe(naturalTokens - 1);
    // The same prompt says the same words: the capped reply is the natural one cut short.
    expect(natural.choices[0]!.message.content!.startsWith(capped.choices[0]!.message.content!)).toBe(true);
    const exact = await openai.chat.completions.create({
      ...EXACT,
      model: engine.model,
      messages,
      max_tokens: 1000,
    });
    expect(exact.choices[0]!.finish_reason).toBe("length");
    expect(exact.usage!.completion_tokens).toBe(1000);
  });

  it("Responses: completed when the reply ends on its own, incomplete when capped or with ignore_eos", async () => {
    const natural = await openai.responses.create({
      model: engine.model,
      input: prompts[1]!,
      max_output_tokens: 4000,
    });
    expect(natural.status).toBe("completed");
    expect(natural.incomplete_details).toBeNull();
    const exact = await openai.responses.create({
      ...EXACT,
      model: engine.model,
      input: prompts[1]!,
      max_output_tokens: 300,
    });
    expect(exact.status).toBe("incomplete");
    expect(exact.usage!.output_tokens).toBe(300);
  });

  it("Messages: end_turn when the reply ends on its own, max_tokens when capped", async () => {
    const messages = [{ role: "user" as const, content: prompts[2]! }];
    const natural = await anthropic.messages.create({ model: engine.model, max_tokens: 4000, messages });
    expect(natural.stop_reason).toBe("end_turn");
    const capped = await anthropic.messages.create({
      model: engine.model,
      max_tokens: natural.usage.output_tokens - 1,
      messages,
    });
    expect(capped.stop_reason).toBe("max_tokens");
    const exact = await anthropic.messages.create({
      ...EXACT,
      model: engine.model,
      max_tokens: 500,
      messages,
    });
    expect(exact.stop_reason).toBe("max_tokens");
    expect(exact.usage.output_tokens).toBe(500);
  });
});
