// The text the re-implemented routers read from a request body.
import { describe, expect, it } from "vitest";
import { promptBytes, routingText } from "../../../src/affinity/policies/routing-text.js";

describe("routingText (sgl-router's extract_text_for_routing)", () => {
  it("joins the message texts by spaces; a bare tool call adds nothing", () => {
    const body = {
      messages: [
        { role: "system", content: "sys" },
        {
          role: "user",
          content: [
            { type: "text", text: "a" },
            { type: "text", text: "b" },
          ],
        },
        { role: "assistant", content: null, tool_calls: [{ id: "1" }] },
        { role: "tool", content: "result" },
        { role: "assistant", content: "done" },
      ],
    };
    expect(routingText("chat", body)).toBe("sys a b result done");
    expect(routingText("completions", { prompt: ["x", "y"] })).toBe("x y");
  });

  it("gives llm-d the JSON of the messages, a completion its prompt", () => {
    const messages = [{ role: "user", content: "hi" }];
    expect(promptBytes("chat", { messages })).toBe(JSON.stringify(messages));
    expect(promptBytes("completions", { prompt: "abc" })).toBe("abc");
  });
});
