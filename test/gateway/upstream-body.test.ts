// The budget's clamp of an answer's length is written into the field the request's API reads (vLLM ignores the
// others): chat the one(s) the client used, completions and Messages max_tokens, Responses max_output_tokens.
import { describe, expect, it } from "vitest";
import { parseCompletionRequest, type Endpoint } from "../../src/gateway/completion-request.js";
import { UpstreamBodies } from "../../src/gateway/upstream-body.js";

const CLAMP_TOKENS = 7;

/** The body the engine gets for `body` sent to `endpoint`, when the budget lowers its limit to CLAMP_TOKENS. */
function clamped(endpoint: Endpoint, body: Record<string, unknown>): Record<string, unknown> {
  const raw = Buffer.from(JSON.stringify(body));
  const bodies = new UpstreamBodies(raw, parseCompletionRequest(raw, endpoint), CLAMP_TOKENS);
  return JSON.parse(bodies.forModel(String(body["model"])).toString("utf8")) as Record<string, unknown>;
}

const CHAT = { model: "m", messages: [{ role: "user", content: "hi" }] };

describe("the budget's clamp, per API", () => {
  it("chat: max_tokens when the client named no limit, or the field(s) it used", () => {
    expect(clamped("chat", CHAT)).toMatchObject({ max_tokens: CLAMP_TOKENS });
    expect(clamped("chat", CHAT)).not.toHaveProperty("max_completion_tokens");
    expect(clamped("chat", { ...CHAT, max_tokens: 100 })).toMatchObject({ max_tokens: CLAMP_TOKENS });
    const newer = clamped("chat", { ...CHAT, max_completion_tokens: 100 });
    expect(newer).toMatchObject({ max_completion_tokens: CLAMP_TOKENS });
    expect(newer).not.toHaveProperty("max_tokens");
    expect(clamped("chat", { ...CHAT, max_tokens: 100, max_completion_tokens: 90 })).toMatchObject({
      max_tokens: CLAMP_TOKENS,
      max_completion_tokens: CLAMP_TOKENS,
    });
  });

  it("completions: max_tokens", () => {
    expect(clamped("completions", { model: "m", prompt: "p", max_tokens: 100 })).toMatchObject({
      max_tokens: CLAMP_TOKENS,
    });
    expect(clamped("completions", { model: "m", prompt: "p" })).toMatchObject({ max_tokens: CLAMP_TOKENS });
  });

  it("Responses: max_output_tokens, never max_tokens", () => {
    for (const body of [
      { model: "m", input: "hi", max_output_tokens: 100 },
      { model: "m", input: "hi" },
    ]) {
      const sent = clamped("responses", body);
      expect(sent).toMatchObject({ max_output_tokens: CLAMP_TOKENS });
      expect(sent).not.toHaveProperty("max_tokens");
    }
  });

  it("Messages: max_tokens", () => {
    const body = { model: "m", max_tokens: 100, messages: [{ role: "user", content: "hi" }] };
    expect(clamped("messages", body)).toMatchObject({ max_tokens: CLAMP_TOKENS });
  });

  it("reads a Responses request's own limit from max_output_tokens (what its budget hold counts)", () => {
    const raw = Buffer.from(JSON.stringify({ model: "m", input: "hi", max_output_tokens: 40 }));
    expect(parseCompletionRequest(raw, "responses").maxTokens).toBe(40);
    const chat = Buffer.from(JSON.stringify({ ...CHAT, max_completion_tokens: 30 }));
    expect(parseCompletionRequest(chat, "chat").maxTokens).toBe(30);
    // Both set: the newer name wins, as vLLM reads them (`max_completion_tokens or max_tokens`).
    const both = Buffer.from(JSON.stringify({ ...CHAT, max_tokens: 500, max_completion_tokens: 30 }));
    expect(parseCompletionRequest(both, "chat").maxTokens).toBe(30);
  });

  it("sends the client's bytes as they are when nothing is clamped", () => {
    const raw = Buffer.from(JSON.stringify({ model: "m", input: "hi", max_output_tokens: 40 }));
    const bodies = new UpstreamBodies(raw, parseCompletionRequest(raw, "responses"));
    expect(bodies.forModel("m")).toBe(raw);
  });
});
