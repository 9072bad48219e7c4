// The prefix key of session-less requests: stable under what does not change the shared prefix, distinct across templates.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  CHAT_PREFIX_MAX_CHARS,
  COMPLETION_PREFIX_CHARS,
  chatPrefixText,
  prefixKeyOf,
  responsesPrefixText,
} from "../../src/affinity/prefix-key.js";
import { parseCompletionRequest } from "../../src/gateway/completion-request.js";

const TOOLS = [{ type: "function", function: { name: "search", parameters: { type: "object" } } }];

function chat(system: string, turns: string[], extra: Record<string, unknown> = {}) {
  const messages: { role: string; content: string }[] = [{ role: "system", content: system }];
  turns.forEach((text, i) => messages.push({ role: i % 2 === 0 ? "user" : "assistant", content: text }));
  return { model: "m", messages, tools: TOOLS, ...extra };
}

const textArb = fc.string({ minLength: 1, maxLength: 200 });

describe("prefixKeyOf", () => {
  it("is stable under temperature, max_tokens, stream, the user turn and every later turn", () => {
    fc.assert(
      fc.property(
        textArb,
        fc.array(textArb, { minLength: 1, maxLength: 6 }),
        fc.array(textArb, { minLength: 1, maxLength: 6 }),
        fc.double({ min: 0, max: 2, noNaN: true }),
        fc.nat({ max: 4096 }),
        (system, turnsA, turnsB, temperature, maxTokens) => {
          const a = prefixKeyOf("chat", chat(system, turnsA));
          const b = prefixKeyOf(
            "chat",
            chat(system, turnsB, { temperature, max_tokens: maxTokens, stream: true }),
          );
          expect(a).toBeDefined();
          expect(b).toEqual(a);
        },
      ),
    );
  });

  it("differs across templates: system prompts or tool definitions that differ give different keys", () => {
    fc.assert(
      fc.property(textArb, textArb, (systemA, systemB) => {
        fc.pre(systemA !== systemB);
        expect(prefixKeyOf("chat", chat(systemA, ["hi"]))).not.toEqual(
          prefixKeyOf("chat", chat(systemB, ["hi"])),
        );
      }),
    );
    const other = [{ type: "function", function: { name: "fetch", parameters: { type: "object" } } }];
    expect(prefixKeyOf("chat", chat("same", ["hi"], { tools: other }))).not.toEqual(
      prefixKeyOf("chat", chat("same", ["hi"])),
    );
    // Six agent templates of the integration test: six keys.
    const keys = new Set(
      Array.from({ length: 6 }, (_, t) =>
        JSON.stringify(prefixKeyOf("chat", chat(`template ${t}: ...`, ["go"]))),
      ),
    );
    expect(keys.size).toBe(6);
  });

  it("has no key for a chat that opens with the user and has no tools (nothing shared to place by)", () => {
    expect(prefixKeyOf("chat", { messages: [{ role: "user", content: "hello" }] })).toBeUndefined();
    expect(
      prefixKeyOf("chat", { messages: [{ role: "user", content: "hello" }], tools: TOOLS }),
    ).toBeDefined();
  });

  it("caps the leading part: text past CHAT_PREFIX_MAX_CHARS does not change the key", () => {
    const long = "x".repeat(CHAT_PREFIX_MAX_CHARS);
    expect(chatPrefixText(chat(long + "tail one", ["hi"])).length).toBe(CHAT_PREFIX_MAX_CHARS);
    expect(prefixKeyOf("chat", chat(long + "tail one", ["hi"]))).toEqual(
      prefixKeyOf("chat", chat(long + "tail two", ["hi"])),
    );
  });

  it("reads text parts of array contents, and tells roles apart", () => {
    const parts = {
      messages: [
        { role: "system", content: [{ type: "text", text: "be brief" }] },
        { role: "user", content: "q" },
      ],
    };
    const plain = {
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "q" },
      ],
    };
    expect(prefixKeyOf("chat", parts)).toEqual(prefixKeyOf("chat", plain));
    const developer = {
      messages: [
        { role: "developer", content: "be brief" },
        { role: "user", content: "q" },
      ],
    };
    expect(prefixKeyOf("chat", developer)).not.toEqual(prefixKeyOf("chat", plain));
  });

  it("uses the first COMPLETION_PREFIX_CHARS of a /v1/completions prompt", () => {
    const template = "t".repeat(COMPLETION_PREFIX_CHARS);
    expect(prefixKeyOf("completions", { prompt: template + "user one" })).toEqual(
      prefixKeyOf("completions", { prompt: template + "user two", temperature: 0.3 }),
    );
    expect(prefixKeyOf("completions", { prompt: "short a" })).not.toEqual(
      prefixKeyOf("completions", { prompt: "short b" }),
    );
    expect(prefixKeyOf("completions", { prompt: [template + "x", "other"] })).toEqual(
      prefixKeyOf("completions", { prompt: template }),
    );
    expect(prefixKeyOf("completions", { prompt: [1, 2, 3] })).toBeDefined();
    expect(prefixKeyOf("completions", { prompt: "" })).toBeUndefined();
  });

  it("is exposed by parseCompletionRequest, computed once and only when read", () => {
    const body = chat("You are a planner.", ["plan my day"]);
    const request = parseCompletionRequest(Buffer.from(JSON.stringify(body)), "chat");
    expect(request.prefixKey).toEqual(prefixKeyOf("chat", body));
    expect(request.prefixKey).toBe(request.prefixKey); // memoised: the same object
  });

  it("keys a Responses API request by its instructions, leading items and tools, not the user's input", () => {
    const a = prefixKeyOf("responses", {
      instructions: "You are the triage agent.",
      input: "ticket 1",
      tools: TOOLS,
    });
    const b = prefixKeyOf("responses", {
      instructions: "You are the triage agent.",
      input: [{ role: "user", content: "ticket 2" }],
      tools: TOOLS,
      temperature: 0.1,
    });
    expect(a).toBeDefined();
    expect(b).toEqual(a);
    expect(
      prefixKeyOf("responses", {
        instructions: "You are the billing agent.",
        input: "ticket 1",
        tools: TOOLS,
      }),
    ).not.toEqual(a);
    expect(prefixKeyOf("responses", { input: "just a question" })).toBeUndefined();
  });

  it("names a Responses item without a role by its type and reads a function call's name and arguments", () => {
    const call = (name: string, args: string) => ({
      instructions: "You are the triage agent.",
      input: [
        { type: "function_call", call_id: "c1", name, arguments: args },
        { type: "function_call_output", call_id: "c1", output: "42" },
        { role: "user", content: "and then?" },
      ],
    });
    const text = responsesPrefixText(call("lookup", '{"id":1}'));
    expect(text).toContain("function_call\u0001lookup");
    expect(text).toContain("function_call_output\u000142");
    expect(text).not.toContain("undefined");
    expect(prefixKeyOf("responses", call("lookup", '{"id":2}'))).not.toEqual(
      prefixKeyOf("responses", call("lookup", '{"id":1}')),
    );
  });
});
