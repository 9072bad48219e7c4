// What the gateway reads off a prompt for KV placement: its length, its blocks, and whether it opens a conversation.
import { describe, expect, it } from "vitest";
import { LazyPromptBlocks, simulatedPromptTokens } from "../../src/kv-events/prompt-blocks.js";

const MODEL = "m";
const SYSTEM = { role: "system", content: "You are a sub-agent. ".repeat(40) };

describe("whether a prompt opens a conversation", () => {
  it("a chat prompt of system and user messages opens one; an earlier answer or tool result continues one", () => {
    const opens = (messages: unknown[]) =>
      simulatedPromptTokens("chat", { model: MODEL, messages })?.opensConversation;
    expect(opens([SYSTEM, { role: "user", content: "Find the bug." }])).toBe(true);
    expect(
      opens([
        { role: "user", content: "a" },
        { role: "user", content: "b" },
      ]),
    ).toBe(true);
    expect(
      opens([
        SYSTEM,
        { role: "user", content: "Find the bug." },
        { role: "assistant", content: "Looking." },
        { role: "user", content: "And?" },
      ]),
    ).toBe(false);
    expect(
      opens([
        SYSTEM,
        { role: "user", content: "Find the bug." },
        {
          role: "assistant",
          content: null,
          tool_calls: [{ id: "c1", type: "function", function: { name: "read", arguments: "{}" } }],
        },
        { role: "tool", tool_call_id: "c1", content: "file text" },
      ]),
    ).toBe(false);
  });

  it("an Anthropic Messages prompt likewise; a raw completions prompt is never taken as opening one", () => {
    const messages = (list: unknown[]) =>
      simulatedPromptTokens("messages", { model: MODEL, max_tokens: 8, system: "Be brief.", messages: list })
        ?.opensConversation;
    expect(messages([{ role: "user", content: "Hello" }])).toBe(true);
    expect(
      messages([
        { role: "user", content: "Hello" },
        { role: "assistant", content: "Hi" },
        { role: "user", content: "Bye" },
      ]),
    ).toBe(false);
    expect(
      simulatedPromptTokens("completions", { model: MODEL, prompt: "Once upon" })?.opensConversation,
    ).toBe(false);
  });

  it("the prompt's blocks carry the fact, for every block size placement asks", () => {
    const blocks = new LazyPromptBlocks("chat", {
      model: MODEL,
      messages: [SYSTEM, { role: "user", content: "x" }],
    });
    expect(blocks.of(16)?.opensConversation).toBe(true);
    expect(blocks.of(32)?.opensConversation).toBe(true);
    expect(blocks.of(32)!.keys.length).toBe(Math.floor((blocks.of(32)!.promptTokens - 1) / 32));
  });
});
