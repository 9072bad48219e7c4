// An engine's own 4xx error reaches the client in its API's envelope, whichever shape the engine used.
import { describe, expect, it } from "vitest";
import {
  engineErrorAnthropic,
  engineErrorBody,
  engineErrorEnvelope,
} from "../../src/gateway/engine-error.js";

const json = (value: unknown): Buffer => Buffer.from(JSON.stringify(value));
const OPENAI_SHAPED = json({
  error: { message: "too long", type: "BadRequestError", param: "max_tokens", code: 400 },
});
const ANTHROPIC_SHAPED = json({
  type: "error",
  error: { type: "invalid_request_error", message: "too long" },
});

describe("engine errors", () => {
  it("keeps vLLM's older and newer OpenAI shapes as the newer one", () => {
    expect(
      engineErrorEnvelope(json({ object: "error", message: "m", type: "T", param: null, code: 400 }), 400),
    ).toEqual({
      error: { message: "m", type: "T", param: null, code: 400 },
    });
    expect(engineErrorEnvelope(OPENAI_SHAPED, 400).error.param).toBe("max_tokens");
    expect(engineErrorEnvelope(Buffer.from("not json"), 422)).toEqual({
      error: { message: "engine answered 422", type: "invalid_request_error", param: null, code: 422 },
    });
  });

  it("gives a Messages client Anthropic's envelope: an OpenAI type becomes the status's, an Anthropic one stays", () => {
    expect(engineErrorAnthropic(OPENAI_SHAPED, 400)).toEqual({
      type: "error",
      error: { type: "invalid_request_error", message: "too long" },
    });
    expect(
      engineErrorAnthropic(json({ error: { message: "slow down", type: "RateLimit" } }), 429).error.type,
    ).toBe("rate_limit_error");
    expect(engineErrorAnthropic(ANTHROPIC_SHAPED, 404).error.type).toBe("invalid_request_error");
    expect(engineErrorAnthropic(Buffer.from(""), 404)).toEqual({
      type: "error",
      error: { type: "not_found_error", message: "engine answered 404" },
    });
  });

  it("picks the envelope by the path the client called", () => {
    const parse = (path: string): unknown => JSON.parse(engineErrorBody(path, OPENAI_SHAPED, 400).toString());
    expect(parse("/v1/messages")).toMatchObject({ type: "error" });
    expect(parse("/v1/messages/count_tokens")).toMatchObject({ type: "error" });
    expect(parse("/v1/chat/completions")).toMatchObject({ error: { param: "max_tokens" } });
  });
});
