// The simulator continues an open final assistant message as a greedy engine would: vLLM's
// continue_final_message on chat, a trailing assistant message (a prefill) on Messages. The continued reply is the
// rest of the reply the conversation without the open part gets, and the prompt counts the open part.
import { afterEach, describe, expect, it } from "vitest";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";

interface ChatAnswer {
  choices: { message: { content: string | null }; finish_reason: string }[];
  usage: { prompt_tokens: number; completion_tokens: number };
}

async function postJson(
  url: string,
  body: object,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

describe("continuing a final assistant message", () => {
  let engine: SimEngineHandle | undefined;
  afterEach(async () => {
    await engine?.close();
    engine = undefined;
  });

  const question = [{ role: "user", content: "Tell me about caches." }];

  it("chat: continue_final_message goes on with the very reply, counting the open part as prompt", async () => {
    engine = await startSimEngine({ profile: "instant", model: "m", seed: 4 });
    const url = `${engine.url}/v1/chat/completions`;
    const whole = (await postJson(url, { messages: question, max_tokens: 30 })).json as unknown as ChatAnswer;
    const text = whole.choices[0]!.message.content!;
    const open = text.slice(0, 4 * 6); // six 4-character tokens
    const rest = (
      await postJson(url, {
        messages: [...question, { role: "assistant", content: open }],
        continue_final_message: true,
        add_generation_prompt: false,
        max_tokens: 24,
      })
    ).json as unknown as ChatAnswer;
    expect(open + rest.choices[0]!.message.content).toBe(text);
    expect(rest.choices[0]!.finish_reason).toBe(whole.choices[0]!.finish_reason);
    expect(rest.usage.prompt_tokens).toBe(whole.usage.prompt_tokens + 6);
    expect(rest.usage.completion_tokens).toBe(whole.usage.completion_tokens - 6);
  });

  it("chat: refuses continue_final_message with add_generation_prompt (vLLM's words), or after a user message", async () => {
    engine = await startSimEngine({ profile: "instant", model: "m" });
    const url = `${engine.url}/v1/chat/completions`;
    const both = await postJson(url, {
      messages: [...question, { role: "assistant", content: "x" }],
      continue_final_message: true,
    });
    expect(both.status).toBe(400);
    expect(JSON.stringify(both.json)).toContain(
      "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
    );
    const afterUser = await postJson(url, {
      messages: question,
      continue_final_message: true,
      add_generation_prompt: false,
    });
    expect(afterUser.status).toBe(400);
  });

  it("Messages: a trailing assistant message is a prefill the reply goes on from", async () => {
    engine = await startSimEngine({ profile: "instant", model: "m", seed: 4 });
    const url = `${engine.url}/v1/messages`;
    const whole = (await postJson(url, { model: "m", messages: question, max_tokens: 30 })).json as {
      content: { text: string }[];
      usage: { input_tokens: number; cache_read_input_tokens: number; output_tokens: number };
    };
    const text = whole.content[0]!.text;
    const open = text.slice(0, 4 * 5);
    const rest = (
      await postJson(url, {
        model: "m",
        messages: [...question, { role: "assistant", content: open }],
        max_tokens: 25,
      })
    ).json as typeof whole;
    expect(open + rest.content[0]!.text).toBe(text);
    expect(rest.usage.input_tokens + rest.usage.cache_read_input_tokens).toBe(
      whole.usage.input_tokens + whole.usage.cache_read_input_tokens + 5,
    );
    expect(rest.usage.output_tokens).toBe(whole.usage.output_tokens - 5);
  });
});
