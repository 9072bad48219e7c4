// Scripted mode over real HTTP: the example script drives chat completions, Responses and Messages clients through
// its turns, picking each call's alternative from the request's tools, choosing conversations by match and the
// turn by the number of assistant turns, with the default reply for side requests.
import Anthropic from "@anthropic-ai/sdk";
import type { MessageParam, Tool } from "@anthropic-ai/sdk/resources/messages";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";
import { compileScript, loadScript } from "../../src/sim/script.js";

let engine: SimEngineHandle;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  engine = await startSimEngine({
    profile: "instant",
    seed: 5,
    maxModelLen: 200_000,
    script: loadScript("configs/sim-script.example.yaml"),
  });
  openai = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: "unused", maxRetries: 0 });
  anthropic = new Anthropic({ baseURL: engine.url, apiKey: "unused", maxRetries: 0 });
});
afterAll(async () => {
  await engine.close();
});

const TASK = "Please fix the failing test in this repository.";
const schema = (property: string): Record<string, unknown> => ({
  type: "object",
  properties: { [property]: { type: "string" } },
  required: [property],
});
/** Claude Code's tools: custom tools with input_schema, no type. */
const CLAUDE_TOOLS: Tool[] = [
  { name: "Bash", description: "Run a command", input_schema: { ...schema("command"), type: "object" } },
  { name: "Read", description: "Read a file", input_schema: { ...schema("file_path"), type: "object" } },
];

describe("scripted mode", () => {
  it("walks Claude Code's Messages conversation turn by turn, streamed: call, parallel calls, final text", async () => {
    const messages: MessageParam[] = [{ role: "user", content: TASK }];
    const first = await anthropic.messages
      .stream({
        model: engine.model,
        max_tokens: 4096,
        system: "You are Claude Code.",
        tools: CLAUDE_TOOLS,
        messages,
      })
      .finalMessage();
    expect(first.stop_reason).toBe("tool_use");
    expect(first.content[0]).toMatchObject({
      type: "text",
      text: expect.stringContaining("run the tests first"),
    });
    const bash = first.content[1];
    expect(bash).toMatchObject({ type: "tool_use", name: "Bash", input: { command: "npm test" } });
    if (bash?.type !== "tool_use") throw new Error("no call");
    messages.push(
      { role: "assistant", content: first.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: bash.id, content: "1 failing" }] },
    );

    const second = await anthropic.messages.create({
      model: engine.model,
      max_tokens: 4096,
      system: "You are Claude Code.",
      tools: CLAUDE_TOOLS,
      messages,
    });
    expect(second.stop_reason).toBe("tool_use");
    expect(second.content).toMatchObject([
      { type: "tool_use", name: "Read", input: { file_path: "src/sum.js" } },
      { type: "tool_use", name: "Read", input: { file_path: "test/sum.test.js" } },
    ]);
    // The script does not depend on the cache, but the trajectory still reuses it turn after turn.
    expect(second.usage.cache_read_input_tokens).toBeGreaterThan(0);
    const results = second.content.map((block) => ({
      type: "tool_result" as const,
      tool_use_id: block.type === "tool_use" ? block.id : "",
      content: "file text",
    }));
    messages.push({ role: "assistant", content: second.content }, { role: "user", content: results });

    const third = await anthropic.messages.create({
      model: engine.model,
      max_tokens: 4096,
      system: "You are Claude Code.",
      tools: CLAUDE_TOOLS,
      messages,
    });
    expect(third.stop_reason).toBe("end_turn");
    expect(third.content).toEqual([{ type: "text", text: expect.stringContaining("sum now adds") }]);
  });

  it("gives Codex's shell its own arguments on the Responses API, and OpenCode's bash on chat completions", async () => {
    const codex = await openai.responses.create({
      model: engine.model,
      instructions: "You are Codex.",
      input: TASK,
      tools: [{ type: "function", name: "shell", parameters: schema("command"), strict: false }],
    });
    const call = codex.output.find((item) => item.type === "function_call");
    expect(call).toMatchObject({ name: "shell" });
    expect(call?.type === "function_call" && JSON.parse(call.arguments)).toEqual({
      command: ["bash", "-lc", "npm test"],
    });

    const stream = await openai.chat.completions.create({
      model: engine.model,
      stream: true,
      messages: [{ role: "user", content: TASK }],
      tools: [
        { type: "function", function: { name: "read", parameters: schema("path") } },
        { type: "function", function: { name: "bash", parameters: schema("command") } },
      ],
    });
    let name = "";
    let args = "";
    let finish: string | null = null;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      for (const delta of choice?.delta.tool_calls ?? []) {
        name += delta.function?.name ?? "";
        args += delta.function?.arguments ?? "";
      }
      finish = choice?.finish_reason ?? finish;
    }
    expect(name).toBe("bash");
    expect(JSON.parse(args)).toEqual({ command: "npm test" });
    expect(finish).toBe("tool_calls");
  });

  it("answers side requests and unmatched conversations with the default, and matches by regex on the user", async () => {
    // Same first message but no tools (a title request): the scripted call cannot be made, so the default answers.
    const title = await openai.chat.completions.create({
      model: engine.model,
      messages: [
        { role: "system", content: "Write a 5-word title for this conversation." },
        { role: "user", content: TASK },
      ],
    });
    expect(title.choices[0]!.message.content).toBe("Done.");
    expect(title.choices[0]!.finish_reason).toBe("stop");

    const greeting = await anthropic.messages.create({
      model: engine.model,
      max_tokens: 100,
      messages: [{ role: "user", content: "hi there, how are you?" }],
    });
    expect(greeting.content).toEqual([{ type: "text", text: "Hello! What shall we work on?" }]);
    // The regex looks at the user message only: the same words in the system prompt do not match.
    const other = await anthropic.messages.create({
      model: engine.model,
      max_tokens: 100,
      system: "hi there",
      messages: [{ role: "user", content: "What time is it?" }],
    });
    expect(other.content).toEqual([{ type: "text", text: "Done." }]);
    // A turn past the conversation's end gets the default too.
    const past = await anthropic.messages.create({
      model: engine.model,
      max_tokens: 100,
      messages: [
        { role: "user", content: "hi there" },
        { role: "assistant", content: "Hello! What shall we work on?" },
        { role: "user", content: "nothing" },
      ],
    });
    expect(past.content).toEqual([{ type: "text", text: "Done." }]);
  });

  it("refuses malformed scripts with the field at fault", () => {
    expect(() => compileScript({ conversations: [] })).toThrow(/conversations/);
    expect(() => compileScript({ conversations: [{ turns: [{}] }] })).toThrow(/text, call or calls/);
    expect(() =>
      compileScript({ conversations: [{ match: { regex: "(" }, turns: [{ text: "x" }] }] }),
    ).toThrow(/match\.regex/);
    expect(() => compileScript({ conversations: [{ turns: [{ text: "x" }] }], extra: 1 })).toThrow(
      /invalid script/,
    );
  });
});
