// Session identity from the signals clients send: which source wins, how each is validated, and threads.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load.js";
import { DEFAULT_SESSION_KEYS, type SessionKeyConfig } from "../../src/config/schema.js";
import { GatewayError } from "../../src/core/errors.js";
import {
  embeddedSessionId,
  identifySession,
  threadKey,
  threadRootText,
} from "../../src/gateway/session-identity.js";

const CHAT = {
  messages: [
    { role: "system", content: "sys" },
    { role: "user", content: "task" },
  ],
};

function headers(entries: Record<string, string | string[]>): NodeJS.Dict<string[]> {
  return Object.fromEntries(Object.entries(entries).map(([k, v]) => [k, Array.isArray(v) ? v : [v]]));
}

function identify(
  h: Record<string, string | string[]>,
  body: Record<string, unknown> = CHAT,
  keys: readonly SessionKeyConfig[] = DEFAULT_SESSION_KEYS,
  chained = false,
): ReturnType<typeof identifySession> {
  return identifySession(headers(h), body, keys, chained);
}

function gatewayError(run: () => unknown): GatewayError {
  try {
    run();
  } catch (err) {
    if (err instanceof GatewayError) return err;
    throw err;
  }
  throw new Error("expected a GatewayError");
}

describe("identifySession with the default session_keys", () => {
  it("takes X-Session-Id as it is, before every other signal", () => {
    expect(identify({ "x-session-id": "s1", "x-claude-code-session-id": "cc" })).toEqual({
      key: "s1",
      clientId: "s1",
      source: "header:x-session-id",
    });
  });

  it("keys Claude Code's, Codex's and prompt_cache_key sessions per thread, naming the source", () => {
    const thread = threadKey("cc", CHAT).slice(2);
    expect(identify({ "x-claude-code-session-id": "cc" })).toEqual({
      key: `cc${thread}`,
      clientId: "cc",
      source: "header:x-claude-code-session-id",
    });
    expect(identify({ "session-id": "cc" })).toEqual({
      key: `cc${thread}`,
      clientId: "cc",
      source: "header:session-id",
    });
    expect(identify({ session_id: "cc" })).toEqual({
      key: `cc${thread}`,
      clientId: "cc",
      source: "header:session_id",
    });
    expect(identify({ "x-session-affinity": "aff" })).toEqual({
      key: "aff",
      clientId: "aff",
      source: "header:x-session-affinity",
    });
    expect(identify({}, { ...CHAT, prompt_cache_key: "cc" })).toEqual({
      key: `cc${thread}`,
      clientId: "cc",
      source: "body:prompt_cache_key",
    });
  });

  it("reads the session_id inside Anthropic metadata.user_id, as JSON and in the older string form", () => {
    const json = JSON.stringify({ device_id: "d", account_uuid: "a", session_id: "1234-abcd" });
    const body = { ...CHAT, metadata: { user_id: json } };
    expect(identify({}, body)).toEqual({
      key: threadKey("1234-abcd", body),
      clientId: "1234-abcd",
      source: "body:metadata.user_id",
    });
    const older = { ...CHAT, metadata: { user_id: "user_9f_account_77_session_5e0c-11" } };
    expect(identify({}, older)).toEqual({
      key: threadKey("5e0c-11", older),
      clientId: "5e0c-11",
      source: "body:metadata.user_id",
    });
    // A user_id naming no session is no session signal: the next entry decides.
    expect(identify({}, { ...CHAT, metadata: { user_id: "plain-user" } })).toBeUndefined();
    expect(embeddedSessionId("{not json", "session_id")).toBeUndefined();
    expect(embeddedSessionId('{"session_id":3}', "session_id")).toBeUndefined();
  });

  it("hands the decision to the Responses chain only when the request is chained, and last", () => {
    expect(identify({}, CHAT, DEFAULT_SESSION_KEYS, true)).toBe("responses_chain");
    expect(identify({}, CHAT, DEFAULT_SESSION_KEYS, false)).toBeUndefined();
    expect(identify({ "session-id": "c" }, CHAT, DEFAULT_SESSION_KEYS, true)).toMatchObject({
      source: "header:session-id",
    });
  });

  it("refuses a malformed value from any source with a 400 naming it, never skipping to the next", () => {
    const long = gatewayError(() => identify({ "x-claude-code-session-id": "x".repeat(257) }));
    expect(long.code).toBe("invalid_header");
    expect(long.status).toBe(400);
    expect(long.param).toBe("x-claude-code-session-id");
    const twice = gatewayError(() => identify({ "session-id": ["a", "b"] }));
    expect(twice.message).toContain("must appear once");
    const field = gatewayError(() => identify({}, { ...CHAT, prompt_cache_key: "tab\there" }));
    expect(field.code).toBe("invalid_request");
    expect(field.param).toBe("prompt_cache_key");
    const notString = gatewayError(() => identify({}, { ...CHAT, prompt_cache_key: 42 }));
    expect(notString.message).toBe("'prompt_cache_key' must be a string");
    const inner = gatewayError(() =>
      identify({}, { ...CHAT, metadata: { user_id: JSON.stringify({ session_id: "é" }) } }),
    );
    expect(inner.param).toBe("metadata.user_id");
  });

  it("any header value gives a valid printable key or a 400 (property)", () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 300 }),
        fc.constantFrom(...["x-session-id", "session-id"]),
        (v, h) => {
          try {
            const identity = identify({ [h]: v });
            if (typeof identity !== "object") return false;
            return /^[\x20-\x7e]+$/.test(identity.key) && identity.key.length <= 256 + 9;
          } catch (err) {
            return err instanceof GatewayError && err.status === 400;
          }
        },
      ),
    );
  });
});

describe("threads", () => {
  it("one conversation keeps its thread key as it grows; a sub-agent's task or another system prompt does not", () => {
    const turn1 = { system: "agent", messages: [{ role: "user", content: "fix the bug" }] };
    const turn5 = {
      system: "agent",
      messages: [
        { role: "user", content: [{ type: "text", text: "fix the bug" }] },
        { role: "assistant", content: "looking" },
        { role: "user", content: "more" },
      ],
    };
    expect(threadKey("s", turn5)).toBe(threadKey("s", turn1));
    const subagent = { system: "agent", messages: [{ role: "user", content: "search for callers" }] };
    expect(threadKey("s", subagent)).not.toBe(threadKey("s", turn1));
    expect(threadKey("s", { ...turn1, system: "title generator" })).not.toBe(threadKey("s", turn1));
    expect(threadKey("s", turn1)).toMatch(/^s#[0-9a-f]{8}$/);
    expect(threadRootText({ instructions: "i", input: "hello" })).toBe("i\u0002hello");
  });

  it("tells sub-agents apart by their task behind a system prompt longer than the cap, as coding agents' are", () => {
    // A task agent's prompt with its tools runs to 24,000 characters in the kvevents study (Claude Code's is longer).
    const system = "You are a task agent. ".repeat(1_200);
    const task = (text: string) => ({
      messages: [
        { role: "system", content: system },
        { role: "user", content: text },
      ],
    });
    const keys = ["search for callers", "read the tests", "find the config"].map((t) =>
      threadKey("s", task(t)),
    );
    expect(new Set(keys).size).toBe(3);
    // Each keeps its key as its conversation grows.
    const grown = task("read the tests");
    grown.messages.push({ role: "assistant", content: "reading" }, { role: "user", content: "next" });
    expect(threadKey("s", grown)).toBe(keys[1]);
    // Bounded work per request: a root of any length hashes at most two capped parts.
    expect(threadRootText(task("x".repeat(100_000))).length).toBeLessThanOrEqual(2 * 8_192 + 1);
  });
});

describe("affinity.session_keys in the config", () => {
  const base = { backends: [{ id: "a", tier: "small", base_url: "http://127.0.0.1:9", model: "m" }] };
  it("defaults to the clients' signals and takes an explicit list", () => {
    expect(parseConfig(base, "t").affinity.session_keys).toEqual(DEFAULT_SESSION_KEYS);
    const config = parseConfig(
      {
        ...base,
        affinity: {
          session_keys: [
            { header: "X-My-Session" },
            { body: "metadata.user_id", json: "session_id", split_threads: true },
            { responses_chain: true },
          ],
        },
      },
      "t",
    );
    expect(config.affinity.session_keys).toEqual([
      { header: "x-my-session", split_threads: false },
      { body: "metadata.user_id", json: "session_id", split_threads: true },
      { responses_chain: true },
    ]);
  });

  it("refuses a bad entry naming its path", () => {
    expect(() =>
      parseConfig({ ...base, affinity: { session_keys: [{ header: "bad header" }] } }, "t"),
    ).toThrow(/affinity\.session_keys\[0\]/);
    expect(() => parseConfig({ ...base, affinity: { session_keys: [{ body: "a..b" }] } }, "t")).toThrow(
      /affinity\.session_keys\[0\]/,
    );
  });
});
