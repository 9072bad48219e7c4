// The tool-call core without HTTP: the decision and its rates, tool_choice validation, and the streaming parser
// on texts the planner does not write itself (text before a call, tags split across tokens).
import { describe, expect, it } from "vitest";
import { SeededRandom } from "../../src/core/random.js";
import {
  DEFAULT_TOOL_CALL_RATES,
  parseToolChoice,
  parseToolOutput,
  planToolCalls,
  ToolCallStreamer,
  type ToolCallPlan,
  type ToolFunction,
} from "../../src/sim/tool-calls.js";

const TOOLS: ToolFunction[] = [
  {
    name: "read_file",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
  },
  { name: "list_dir", parameters: { type: "object", properties: {} } },
];

function pieces(text: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += 4) out.push(text.slice(i, i + 4));
  return out;
}

describe("planToolCalls", () => {
  const decision = {
    tools: TOOLS,
    choice: "auto" as const,
    afterToolResult: false,
    parallelAllowed: true,
    rates: DEFAULT_TOOL_CALL_RATES,
  };

  it("calls after a user turn and answers in text after a tool result, by default", () => {
    expect(planToolCalls(decision, new SeededRandom(1))?.calls).toHaveLength(1);
    expect(planToolCalls({ ...decision, afterToolResult: true }, new SeededRandom(1))).toBeUndefined();
    expect(planToolCalls({ ...decision, choice: "none" }, new SeededRandom(1))).toBeUndefined();
  });

  it("follows the configured rate", () => {
    const rates = { ...DEFAULT_TOOL_CALL_RATES, afterUser: 0.3 };
    let calls = 0;
    for (let seed = 0; seed < 2000; seed++) {
      if (planToolCalls({ ...decision, rates }, new SeededRandom(seed))) calls++;
    }
    expect(calls / 2000).toBeGreaterThan(0.25);
    expect(calls / 2000).toBeLessThan(0.35);
  });

  it("writes the text each mode generates", () => {
    const named = planToolCalls({ ...decision, choice: { name: "read_file" } }, new SeededRandom(2))!;
    expect(named.mode).toBe("named");
    expect(named.text).toBe(named.calls[0]!.arguments);
    const required = planToolCalls({ ...decision, choice: "required" }, new SeededRandom(2))!;
    expect(JSON.parse(required.text)).toEqual(
      required.calls.map((c) => ({ name: c.name, parameters: JSON.parse(c.arguments) as unknown })),
    );
  });
});

describe("parseToolChoice", () => {
  it("reads both APIs' spellings and rejects what vLLM rejects", () => {
    expect(parseToolChoice(undefined, TOOLS)).toBe("auto");
    expect(parseToolChoice(undefined, [])).toBe("none");
    expect(parseToolChoice({ type: "function", function: { name: "list_dir" } }, TOOLS)).toEqual({
      name: "list_dir",
    });
    expect(parseToolChoice({ type: "function", name: "list_dir" }, TOOLS)).toEqual({ name: "list_dir" });
    expect(() => parseToolChoice({ type: "function", name: "rm" }, TOOLS)).toThrow(/has not been passed/);
    expect(() => parseToolChoice("required", [])).toThrow(/tools/);
    expect(() => parseToolChoice("sometimes", TOOLS)).toThrow(/tool_choice/);
  });
});

describe("ToolCallStreamer", () => {
  const call = { id: "chatcmpl-tool-1", name: "read_file", arguments: '{"path": "a <b> c"}' };
  const text = `Let me look.<tool_call>\n{"name": "read_file", "arguments": ${call.arguments}}\n</tool_call>`;
  const plan: ToolCallPlan = { mode: "auto", calls: [call], text };

  it("sends text before the call as content, never a piece of a tag, then the call", () => {
    const streamer = new ToolCallStreamer(plan);
    let content = "";
    let args = "";
    const names: string[] = [];
    for (const piece of pieces(text)) {
      const delta = streamer.push(piece);
      content += delta?.content ?? "";
      for (const d of delta?.toolCalls ?? []) {
        if (d.function.name) names.push(d.function.name);
        args += d.function.arguments ?? "";
      }
    }
    expect(content).toBe("Let me look.");
    expect(names).toEqual(["read_file"]);
    expect(args).toBe(call.arguments);
    expect(parseToolOutput(plan, text)).toEqual({ content: "Let me look.", calls: [call] });
  });

  it("gives back the partial text as content when the call was cut short", () => {
    expect(parseToolOutput(plan, text.slice(0, 30))).toEqual({ content: text.slice(0, 30), calls: [] });
  });
});
