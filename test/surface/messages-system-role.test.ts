// A role "system" message inside a Messages request's `messages`: rendered in place (vLLM 0.24 to 0.25.1), or
// refused as vLLM before 0.24 refused it.
import { describe, expect, it } from "vitest";
import { parseMessagesRequest } from "../../src/surface/messages-request.js";

const BODY = {
  model: "m",
  max_tokens: 16,
  system: [{ type: "text", text: "You are a coding agent." }],
  messages: [
    { role: "user", content: "Write hello.txt" },
    { role: "system", content: [{ type: "text", text: "# Environment" }] },
  ],
};

describe("system messages inside messages", () => {
  it("are a system turn where they stand by default", () => {
    expect(parseMessagesRequest(BODY).messages).toEqual([
      { role: "system", content: "You are a coding agent." },
      { role: "user", content: "Write hello.txt" },
      { role: "system", content: "# Environment" },
    ]);
  });

  it("are a 400 naming the message with systemMessages refuse", () => {
    expect(() => parseMessagesRequest(BODY, false, "refuse")).toThrow(
      'messages[1]: expected {"role": "user" | "assistant", "content": ...}',
    );
  });
});
