// The agent's turn loop with a scripted model (unit test only): tool calls run, results go back, bounds hold.
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { describe, expect, it, vi } from "vitest";
import { runTurn } from "../../src/agent/agent-loop.js";
import type { ModelRequest, ModelStep, ToolCallRequest } from "../../src/agent/model-call.js";
import { Toolbox } from "../../src/agent/toolbox.js";
import { calculatorTool } from "../../src/agent/tools/calculator.js";
import type { AgentTool } from "../../src/agent/tools/tool.js";

function step(content: string, toolCalls: ToolCallRequest[] = []): ModelStep {
  return {
    content,
    toolCalls,
    finishReason: toolCalls.length > 0 ? "tool_calls" : "stop",
    status: 200,
    backend: "small-0",
    tier: "small",
    affinityHit: true,
    reason: "affinity_hit",
    ttftMs: 5,
    e2eMs: 10,
    promptTokens: 100,
    cachedTokens: 80,
    completionTokens: 10,
  };
}

/** Answers from a script, and keeps a copy of every request it was sent. */
function scriptedModel(script: ((request: ModelRequest) => ModelStep)[]) {
  const requests: { messages: ChatCompletionMessageParam[]; toolChoice: string; tools: string[] }[] = [];
  const model = (request: ModelRequest): Promise<ModelStep> => {
    requests.push({
      messages: structuredClone(request.messages),
      toolChoice: request.toolChoice,
      tools: request.tools.map((tool) => tool.function.name),
    });
    const next = script[requests.length - 1];
    if (next === undefined) throw new Error("the script ran out");
    return Promise.resolve(next(request));
  };
  return { model, requests };
}

const echoTool: AgentTool = {
  name: "echo",
  description: "says what it was given",
  parameters: {
    type: "object",
    properties: { text: { type: "string" } },
    required: ["text"],
    additionalProperties: false,
  },
  limits: { timeoutMs: 1000, memoryBytes: 1024, outputChars: 100 },
  run: (args) => Promise.resolve({ ok: true, output: `echo: ${String(args["text"])}` }),
};

describe("runTurn", () => {
  it("runs the tools the model asks for and hands their results back until a text answer", async () => {
    const toolbox = new Toolbox([calculatorTool(), echoTool]);
    const { model, requests } = scriptedModel([
      () =>
        step("Let me compute that.", [
          { id: "call_a", name: "calculator", arguments: '{"expression":"1 + 2 * 3"}' },
          { id: "call_b", name: "echo", arguments: '{"text":"hi"}' },
        ]),
      (request) => {
        const results = request.messages.filter((m) => m.role === "tool").map((m) => m.content);
        return step(`The answer is ${String(results[0])}.`);
      },
    ]);
    const history: ChatCompletionMessageParam[] = [{ role: "system", content: "be brief" }];
    const record = await runTurn(history, "what is 1 + 2 * 3?", 1, { model, toolbox, maxSteps: 4 });

    expect(record).toMatchObject({ turn: 1, completed: true, answer: "The answer is 7." });
    expect(record.steps).toHaveLength(2);
    expect(record.toolCalls.map((call) => [call.name, call.ok])).toEqual([
      ["calculator", true],
      ["echo", true],
    ]);
    expect(requests[0]!.tools).toEqual(["calculator", "echo"]);
    expect(requests.map((r) => r.toolChoice)).toEqual(["auto", "auto"]);
    expect(history.slice(1)).toEqual([
      { role: "user", content: "what is 1 + 2 * 3?" },
      {
        role: "assistant",
        content: "Let me compute that.",
        tool_calls: [
          {
            id: "call_a",
            type: "function",
            function: { name: "calculator", arguments: '{"expression":"1 + 2 * 3"}' },
          },
          { id: "call_b", type: "function", function: { name: "echo", arguments: '{"text":"hi"}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_a", content: "7" },
      { role: "tool", tool_call_id: "call_b", content: "echo: hi" },
      { role: "assistant", content: "The answer is 7." },
    ]);
  });

  it("hands a bad call back as an error result and carries on", async () => {
    const toolbox = new Toolbox([calculatorTool()]);
    const { model, requests } = scriptedModel([
      () =>
        step("", [
          { id: "c1", name: "calculator", arguments: "{not json" },
          { id: "c2", name: "shell", arguments: '{"cmd":"ls"}' },
          { id: "c3", name: "calculator", arguments: '{"expression":"2 +"}' },
        ]),
      () => step("I could not compute it."),
    ]);
    const record = await runTurn([], "go", 1, { model, toolbox, maxSteps: 3 });
    expect(record.completed).toBe(true);
    expect(record.toolCalls.map((call) => call.ok)).toEqual([false, false, false]);
    const toolMessages = requests[1]!.messages.filter((m) => m.role === "tool").map((m) => m.content);
    expect(toolMessages).toEqual([
      "error: the arguments are not valid JSON",
      "error: no tool named 'shell'; the tools are calculator",
      "error: the expression ends too early",
    ]);
    // An assistant message with tool calls and no text carries content null, as the API expects.
    expect(requests[1]!.messages[1]).toMatchObject({ role: "assistant", content: null });
  });

  it("tells the model to answer without tools on the last step it allows", async () => {
    const toolbox = new Toolbox([echoTool]);
    const ask = () => step("", [{ id: "x", name: "echo", arguments: '{"text":"again"}' }]);
    const { model, requests } = scriptedModel([
      ask,
      ask,
      (request) => (request.toolChoice === "none" ? step("done") : ask()),
    ]);
    const record = await runTurn([], "loop", 1, { model, toolbox, maxSteps: 3 });
    expect(requests.map((r) => r.toolChoice)).toEqual(["auto", "auto", "none"]);
    expect(record).toMatchObject({ completed: true, answer: "done" });
    expect(record.toolCalls).toHaveLength(2);
  });

  it("ends the turn, not the run, when the model keeps calling tools or a call fails", async () => {
    const toolbox = new Toolbox([echoTool]);
    const ask = () => step("", [{ id: "x", name: "echo", arguments: '{"text":"again"}' }]);
    const stubborn = scriptedModel([ask, ask]);
    expect(await runTurn([], "loop", 1, { model: stubborn.model, toolbox, maxSteps: 2 })).toMatchObject({
      completed: false,
      error: "no text answer within 2 model calls",
    });
    const failing = scriptedModel([() => ({ ...step(""), status: 503, error: "503 no healthy backend" })]);
    expect(await runTurn([], "hi", 2, { model: failing.model, toolbox, maxSteps: 2 })).toMatchObject({
      turn: 2,
      completed: false,
      error: "503 no healthy backend",
    });
  });
});

describe("Toolbox", () => {
  it("lets a self-timed tool report its own stop past its limit", async () => {
    // The toolbox's timer runs on fake time: the tool answers exactly when the test says, never by chance.
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    try {
      let finish: (() => void) | undefined;
      const selfTimed: AgentTool = {
        ...echoTool,
        name: "sandboxish",
        selfTimed: true,
        limits: { ...echoTool.limits, timeoutMs: 5 },
        run: () =>
          new Promise((resolve) => {
            finish = () => resolve({ ok: false, output: "error: stopped: the code ran longer than 5 ms" });
          }),
      };
      const own = new Toolbox([selfTimed]).call("sandboxish", "{}");
      await vi.advanceTimersByTimeAsync(30); // past its limit: a self-timed tool is still waited for
      finish!();
      expect(await own).toMatchObject({
        ok: false,
        output: "error: stopped: the code ran longer than 5 ms",
      });
      // The same tool, not self-timed, is stopped by the toolbox at its limit.
      const stopped = new Toolbox([{ ...selfTimed, selfTimed: false }]).call("sandboxish", "{}");
      await vi.advanceTimersByTimeAsync(5);
      expect(await stopped).toMatchObject({
        output: "error: sandboxish took longer than its limit of 5 ms",
      });
    } finally {
      vi.useRealTimers();
    }
  });

  it("describes its tools as OpenAI function tools", () => {
    expect(new Toolbox([calculatorTool()]).definitions()).toEqual([
      {
        type: "function",
        function: {
          name: "calculator",
          description: expect.stringContaining("arithmetic") as unknown,
          parameters: calculatorTool().parameters,
        },
      },
    ]);
  });

  it("stops a tool at its time limit, turns a throw into an error result, and caps output", async () => {
    const hanging: AgentTool = {
      ...echoTool,
      name: "hang",
      limits: { ...echoTool.limits, timeoutMs: 20 },
      run: () => new Promise(() => undefined),
    };
    const throwing: AgentTool = {
      ...echoTool,
      name: "throw",
      run: () => Promise.reject(new Error("disk on fire")),
    };
    const chatty: AgentTool = {
      ...echoTool,
      name: "chatty",
      run: () => Promise.resolve({ ok: true, output: "z".repeat(1000) }),
    };
    const toolbox = new Toolbox([hanging, throwing, chatty]);
    expect(await toolbox.call("hang", "{}")).toMatchObject({
      ok: false,
      output: "error: hang took longer than its limit of 20 ms",
    });
    expect(await toolbox.call("throw", "{}")).toMatchObject({
      ok: false,
      output: "error: throw failed: disk on fire",
    });
    const long = await toolbox.call("chatty", "{}");
    expect(long.output).toHaveLength(100);
    expect(long.record).toMatchObject({ name: "chatty", ok: true });
    expect(await toolbox.call("chatty", "[1]")).toMatchObject({
      ok: false,
      output: "error: the arguments must be a JSON object",
    });
  });
});
