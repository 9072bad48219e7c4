// Claude Code's mid-conversation system messages and billing header, adapted: folded in place, never hoisted, so
// each turn's messages still extend the previous turn's.
import { describe, expect, it } from "vitest";
import { adaptMessagesSystem } from "../../src/gateway/adaptation/messages-system.js";

const ON = { foldSystemMessages: true, dropBillingHeader: true };
const BILLING = {
  type: "text",
  text: "x-anthropic-billing-header: cc_version=2.1.332.d60; cc_entrypoint=sdk-cli;",
};
const SYSTEM = [BILLING, { type: "text", text: "You are Claude Code." }];
const ENV = { role: "system", content: [{ type: "text", text: "# Environment\ncwd: /work" }] };
const TASK = { role: "user", content: [{ type: "text", text: "Write hello.txt" }] };
const CALL = { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "Write", input: {} }] };
const RESULT = { role: "user", content: [{ type: "tool_result", tool_use_id: "t1", content: "ok" }] };

describe("adaptMessagesSystem", () => {
  it("folds a system message into the user turn before it and drops the billing header", () => {
    const adapted = adaptMessagesSystem({ system: SYSTEM, messages: [TASK, ENV] }, ON);
    expect(adapted?.changes).toEqual(["drop_billing_header", "fold_system_messages:1"]);
    expect(adapted?.body["system"]).toEqual([SYSTEM[1]]);
    expect(adapted?.body["messages"]).toEqual([
      { role: "user", content: [{ type: "text", text: "Write hello.txt\n\n# Environment\ncwd: /work" }] },
    ]);
  });

  it("keeps every turn's messages an extension of the previous turn's (the cached prefix)", () => {
    const turns = [
      [TASK, ENV],
      [TASK, ENV, CALL, RESULT],
      [TASK, ENV, CALL, RESULT, CALL, RESULT],
    ];
    const adapted = turns.map(
      (messages) => adaptMessagesSystem({ system: SYSTEM, messages }, ON)?.body["messages"] as unknown[],
    );
    for (let i = 1; i < adapted.length; i++)
      expect(adapted[i]!.slice(0, adapted[i - 1]!.length)).toEqual(adapted[i - 1]);
    // never hoisted: the top-level system prompt is the same on every turn
    expect(adaptMessagesSystem({ system: SYSTEM, messages: turns[2]! }, ON)?.body["system"]).toEqual([
      SYSTEM[1],
    ]);
  });

  it("puts a system message after an assistant turn at the head of the next user turn, or in a turn of its own", () => {
    const between = adaptMessagesSystem({ messages: [TASK, CALL, ENV, RESULT] }, ON)?.body["messages"];
    expect(between).toEqual([
      TASK,
      CALL,
      { role: "user", content: [{ type: "text", text: "# Environment\ncwd: /work" }, ...RESULT.content] },
    ]);
    const last = adaptMessagesSystem({ messages: [TASK, CALL, ENV] }, ON)?.body["messages"];
    expect(last).toEqual([TASK, CALL, { role: "user", content: "# Environment\ncwd: /work" }]);
  });

  it("joins string content with a blank line", () => {
    const adapted = adaptMessagesSystem({ messages: [{ role: "user", content: "hi" }, ENV] }, ON);
    expect(adapted?.body["messages"]).toEqual([{ role: "user", content: "hi\n\n# Environment\ncwd: /work" }]);
  });

  it("changes nothing without system messages or billing header, or when turned off", () => {
    expect(adaptMessagesSystem({ system: [SYSTEM[1]], messages: [TASK] }, ON)).toBeUndefined();
    const off = { foldSystemMessages: false, dropBillingHeader: false };
    expect(adaptMessagesSystem({ system: SYSTEM, messages: [TASK, ENV] }, off)).toBeUndefined();
  });
});
