// The engine core on real llama.cpp (in process, the tiny generated model): slot reuse when a turn's tail diverges.
//
// Skipped with the binding's own message where node-llama-cpp cannot load, except under CI=true (a failure there).
import { afterAll, beforeAll, describe, expect, it, type TestContext } from "vitest";
import type { ChatMessage } from "../../src/sim/chat-template.js";
import { EngineUnavailableError, loadLlama, type LlamaModel } from "../../src/engine/llama-binding.js";
import { LlamaEngine, type GenerateParams } from "../../src/engine/llama-engine.js";
import { ensureModel } from "../../src/engine/model-maker.js";

let model: LlamaModel | undefined;
let unavailable: string | undefined;
const engines: LlamaEngine[] = [];

beforeAll(async () => {
  try {
    const llama = await loadLlama(1);
    model = await llama.loadModel({ modelPath: await ensureModel("tiny") });
  } catch (err) {
    if (!(err instanceof EngineUnavailableError) || process.env["CI"] === "true") throw err;
    unavailable = err.message;
  }
}, 60_000);

afterAll(async () => {
  for (const engine of engines) await engine.dispose();
  await model?.dispose();
});

function skipIfUnavailable(context: TestContext): void {
  if (unavailable !== undefined) context.skip();
}

async function engine(slots: number): Promise<LlamaEngine> {
  const created = await LlamaEngine.create(model!, { slots, ctxSize: 1024, batchSize: 256, threads: 1 });
  engines.push(created);
  return created;
}

function generate(on: LlamaEngine, prompt: number[], maxTokens: number): ReturnType<LlamaEngine["generate"]> {
  const params: GenerateParams = {
    prompt,
    maxTokens,
    sampling: { temperature: 0 },
    signal: new AbortController().signal,
  };
  return on.generate(params);
}

const SYSTEM: ChatMessage = { role: "system", content: "You are a careful agent. ".repeat(20) };

describe("LlamaEngine on llama.cpp", () => {
  it("keeps a conversation's slot when its reply comes back tokenized otherwise, and cuts the state there", async (context) => {
    skipIfUnavailable(context);
    const warm = await engine(2);
    const first: ChatMessage[] = [SYSTEM, { role: "user", content: "List the files." }];
    const firstPrompt = warm.chat.render(first, undefined);
    const reply = await generate(warm, firstPrompt, 8);
    expect(reply.cachedTokens).toBe(0);

    // The client sends back a reply whose tokens differ from the generated ones from the first on: what a
    // re-tokenized reply does at its worst. The slot's state diverges right after the first prompt, and a free
    // slot is there to tempt the choice.
    const edited = "[reply edited by the client]";
    expect(warm.model.tokenize(edited)[0]).not.toBe(warm.model.tokenize(reply.text)[0]);
    const second: ChatMessage[] = [
      ...first,
      { role: "assistant", content: edited },
      { role: "user", content: "And now?" },
    ];
    const secondPrompt = warm.chat.render(second, undefined);
    const answer = await generate(warm, secondPrompt, 6);
    // llama.cpp decoded only the tokens after the first prompt (measured by its token meter, not planned).
    expect(answer.cachedTokens).toBe(firstPrompt.length);
    expect(answer.promptTokens).toBe(secondPrompt.length);

    // The truncated state is the right one: the same prompt evaluated cold gives the same greedy reply.
    const cold = await generate(await engine(1), secondPrompt, 6);
    expect(cold.cachedTokens).toBe(0);
    expect(answer.text).toBe(cold.text);
  });

  it("sends a new conversation that shares only the system prompt to the free slot", async (context) => {
    skipIfUnavailable(context);
    const warm = await engine(2);
    const a: ChatMessage[] = [SYSTEM, { role: "user", content: "Conversation A." }];
    await generate(warm, warm.chat.render(a, undefined), 4);
    const b = await generate(
      warm,
      warm.chat.render([SYSTEM, { role: "user", content: "B here." }], undefined),
      4,
    );
    expect(b.cachedTokens).toBe(0);
    // A's history is still whole: its next turn reuses its entire first prompt.
    const next = warm.chat.render(
      [...a, { role: "assistant", content: "ok" }, { role: "user", content: "more" }],
      undefined,
    );
    const aNext = await generate(warm, next, 4);
    expect(aNext.cachedTokens).toBeGreaterThanOrEqual(warm.chat.render(a, undefined).length);
  });
});

describe("ChatPrompt's continue_final_message and add_generation_prompt", () => {
  it("leaves the final assistant message open: the conversation's ids, the header, then its text alone", async (context) => {
    skipIfUnavailable(context);
    const chat = (await engine(1)).chat;
    const conversation: ChatMessage[] = [SYSTEM, { role: "user", content: "Name a harbour." }];
    const open = chat.render([...conversation, { role: "assistant", content: "The harbour of" }], undefined, {
      addGenerationPrompt: false,
      continueFinalMessage: true,
    });
    // The no-fault prompt ends with the assistant header, whose reply the open text goes on.
    expect(open).toEqual([...chat.render(conversation, undefined), ...model!.tokenize("The harbour of")]);
    // Without continue_final_message the same message is a closed turn, followed by no header.
    const closed = chat.render(
      [...conversation, { role: "assistant", content: "The harbour of" }],
      undefined,
      {
        addGenerationPrompt: false,
      },
    );
    expect(model!.detokenize(closed.slice(open.length), true)).toBe("<|im_end|>\n");
    expect(closed.slice(0, open.length)).toEqual(open);
  });
});
