// The shared client case list: each library's adapter runs every case that applies, direct and through the gateway.
import { describe, expect, it } from "vitest";
import type { SimEngineOptions } from "../../src/sim/index.js";
import {
  askedUsage,
  engineIdNames,
  engineRequest,
  expectTurnMatchesEngine,
  pathIndependent,
  type ToolCall,
  type TurnOutcome,
} from "./outcome.js";
import { generationExchanges, startRig, type Rig, type Target } from "./rig.js";

export type { Target } from "./rig.js";
export type { AgentServeSeen, ToolCall, TurnOutcome, Usage } from "./outcome.js";

/** A chat message in OpenAI's shape, which each adapter maps to its library's own. */
export type Message =
  | { role: "system" | "user"; content: string }
  | { role: "assistant"; content: string; toolCalls?: ToolCall[] }
  | { role: "tool"; content: string; toolCallId: string; toolName: string };

export interface ToolSpec {
  name: string;
  description: string;
  /** JSON Schema of the arguments. */
  parameters: { type: "object"; properties: Record<string, unknown>; required: string[] };
}

export interface ChatCall {
  messages: Message[];
  tools?: ToolSpec[];
  stream: boolean;
  /** Streaming only: ask for the usage chunk. */
  includeUsage: boolean;
  maxTokens?: number;
}

export interface RespondCall {
  input: string;
  previousResponseId?: string;
  stream: boolean;
  maxTokens: number;
}

export type AgentModelKind = "chat" | "responses";

export interface AgentCall {
  model: AgentModelKind;
  /** User inputs, one per turn; the agent answers each (calling tools) before the next. */
  turns: string[];
  stream: boolean;
}

/** One library (at one version) as the cases drive it. Absent methods: the library has no such API. */
export interface ClientLibrary {
  /** e.g. "openai 6.49.0". */
  name: string;
  chat?(target: Target, call: ChatCall): Promise<TurnOutcome>;
  /** False when the library always asks for stream usage (then "streaming without usage" does not apply). */
  canStreamWithoutUsage?: boolean;
  /** `for await (const c of stream) c.choices[0].delta.content`, exactly. */
  bareLoop?(target: Target, call: ChatCall): Promise<TurnOutcome>;
  /** The SDK's `.chat.completions.stream()` helper and its final completion. */
  streamHelper?(target: Target, call: ChatCall): Promise<TurnOutcome>;
  respond?(target: Target, call: RespondCall): Promise<TurnOutcome>;
  /** Every model call the agent made, in order. */
  agent?(target: Target, call: AgentCall): Promise<TurnOutcome[]>;
  agentModels?: AgentModelKind[];
}

export const WEATHER_TOOL: ToolSpec = {
  name: "get_weather",
  description: "Current weather in a city",
  parameters: {
    type: "object",
    properties: {
      city: { type: "string", enum: ["Paris", "Oslo", "Lima"] },
      unit: { type: "string", enum: ["celsius", "fahrenheit"] },
    },
    required: ["city", "unit"],
  },
};

export const TIME_TOOL: ToolSpec = {
  name: "get_time",
  description: "Local time in a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string", enum: ["Paris", "Oslo", "Lima"] } },
    required: ["city"],
  },
};

export const TOOLS = [WEATHER_TOOL, TIME_TOOL];

/** The tools' deterministic answers (the same on both paths, so the follow-up prompts are equal). */
export function toolResult(name: string, argumentsJson: string): string {
  const args = JSON.parse(argumentsJson) as { city?: string; unit?: string };
  return name === WEATHER_TOOL.name
    ? JSON.stringify({ city: args.city, temperature: 21, unit: args.unit })
    : JSON.stringify({ city: args.city, time: "12:30" });
}

const USER_TURNS = [
  "Plan a three-step refactor of the billing module.",
  "Now list the risks of step two.",
  "Summarise everything in one sentence.",
];
const TEXT_MAX_TOKENS = 12;

interface ClientCase {
  name: string;
  applies(library: ClientLibrary): boolean;
  /** Options for every engine of both paths (e.g. tool-call rates). */
  sim?: Partial<SimEngineOptions>;
  run(library: ClientLibrary, target: Target): Promise<TurnOutcome[]>;
  /** Extra expectations on one path's turns (the same for both). */
  check?(turns: TurnOutcome[]): void;
}

async function threeTurnChat(
  library: ClientLibrary,
  target: Target,
  mode: { stream: boolean; includeUsage: boolean },
  call: (target: Target, call: ChatCall) => Promise<TurnOutcome>,
): Promise<TurnOutcome[]> {
  const messages: Message[] = [{ role: "system", content: "You are a careful coding agent." }];
  const turns: TurnOutcome[] = [];
  for (const user of USER_TURNS) {
    messages.push({ role: "user", content: user });
    const turn = await call(target, { messages: [...messages], maxTokens: TEXT_MAX_TOKENS, ...mode });
    turns.push(turn);
    messages.push({ role: "assistant", content: turn.text });
  }
  return turns;
}

/** Asks with tools, answers every call with its result, and asks again. */
async function toolRound(library: ClientLibrary, target: Target, stream: boolean): Promise<TurnOutcome[]> {
  const messages: Message[] = [
    { role: "user", content: "What is the weather in Oslo, and what time is it there?" },
  ];
  const first = await library.chat!(target, {
    messages: [...messages],
    tools: TOOLS,
    stream,
    includeUsage: true,
  });
  messages.push({ role: "assistant", content: first.text, toolCalls: first.toolCalls });
  for (const call of first.toolCalls) {
    messages.push({
      role: "tool",
      content: toolResult(call.name, call.arguments),
      toolCallId: call.id,
      toolName: call.name,
    });
  }
  const second = await library.chat!(target, {
    messages,
    tools: TOOLS,
    stream,
    includeUsage: true,
    maxTokens: TEXT_MAX_TOKENS,
  });
  return [first, second];
}

function expectToolRound(turns: TurnOutcome[], minCalls: number): void {
  const [first, second] = turns;
  expect(first!.toolCalls.length).toBeGreaterThanOrEqual(minCalls);
  for (const call of first!.toolCalls) {
    expect(TOOLS.map((t) => t.name)).toContain(call.name);
    expect(() => JSON.parse(call.arguments) as unknown).not.toThrow();
  }
  expect(second!.toolCalls).toEqual([]);
  expect(second!.text.length).toBeGreaterThan(0);
}

function expectUsageOnEveryTurn(turns: TurnOutcome[]): void {
  for (const turn of turns) {
    expect(turn.usage).toBeDefined();
    expect(turn.usage!.promptTokens).toBeGreaterThan(0);
    expect(turn.usage!.completionTokens).toBeGreaterThan(0);
  }
}

/** Parallel calls: every user turn gets as many calls as the tools allow. */
const PARALLEL_SIM: Partial<SimEngineOptions> = { parallelToolCallRate: 1 };

export const CLIENT_CASES: ClientCase[] = [
  {
    name: "chat, 3 turns, JSON",
    applies: (l) => l.chat !== undefined,
    run: (l, t) => threeTurnChat(l, t, { stream: false, includeUsage: false }, l.chat!.bind(l)),
    check: expectUsageOnEveryTurn,
  },
  {
    name: "chat, 3 turns, streaming with usage",
    applies: (l) => l.chat !== undefined,
    run: (l, t) => threeTurnChat(l, t, { stream: true, includeUsage: true }, l.chat!.bind(l)),
    check: expectUsageOnEveryTurn,
  },
  {
    name: "chat, 3 turns, streaming without usage",
    applies: (l) => l.chat !== undefined && l.canStreamWithoutUsage === true,
    run: (l, t) => threeTurnChat(l, t, { stream: true, includeUsage: false }, l.chat!.bind(l)),
    check: (turns) => {
      for (const turn of turns) expect(turn.usage).toBeUndefined();
    },
  },
  {
    name: "bare choices[0].delta loop",
    applies: (l) => l.bareLoop !== undefined,
    run: (l, t) => threeTurnChat(l, t, { stream: true, includeUsage: false }, l.bareLoop!.bind(l)),
  },
  {
    name: ".stream() helper, final completion",
    applies: (l) => l.streamHelper !== undefined,
    run: (l, t) => threeTurnChat(l, t, { stream: true, includeUsage: true }, l.streamHelper!.bind(l)),
    check: expectUsageOnEveryTurn,
  },
  {
    name: "tool call + tool result, JSON",
    applies: (l) => l.chat !== undefined,
    run: (l, t) => toolRound(l, t, false),
    check: (turns) => expectToolRound(turns, 1),
  },
  {
    name: "tool call + tool result, streaming",
    applies: (l) => l.chat !== undefined,
    run: (l, t) => toolRound(l, t, true),
    check: (turns) => expectToolRound(turns, 1),
  },
  {
    name: "parallel tool calls, JSON and streaming",
    applies: (l) => l.chat !== undefined,
    sim: PARALLEL_SIM,
    run: async (l, t) => [...(await toolRound(l, t, false)), ...(await toolRound(l, t, true))],
    check: (turns) => {
      expectToolRound(turns.slice(0, 2), 2);
      expectToolRound(turns.slice(2), 2);
    },
  },
  {
    name: "agent, Chat Completions model, two tools, 3 turns, JSON",
    applies: (l) => l.agent !== undefined && (l.agentModels ?? []).includes("chat"),
    run: (l, t) => l.agent!(t, { model: "chat", turns: USER_TURNS, stream: false }),
    check: (turns) => expectAgentTurns(turns),
  },
  {
    name: "agent, Chat Completions model, two tools, 3 turns, streaming",
    applies: (l) => l.agent !== undefined && (l.agentModels ?? []).includes("chat"),
    run: (l, t) => l.agent!(t, { model: "chat", turns: USER_TURNS, stream: true }),
    check: (turns) => expectAgentTurns(turns),
  },
  {
    name: "agent, Responses model, two tools, 3 turns, JSON",
    applies: (l) => l.agent !== undefined && (l.agentModels ?? []).includes("responses"),
    run: (l, t) => l.agent!(t, { model: "responses", turns: USER_TURNS, stream: false }),
    check: (turns) => expectAgentTurns(turns),
  },
  {
    name: "agent, Responses model, two tools, 3 turns, streaming",
    applies: (l) => l.agent !== undefined && (l.agentModels ?? []).includes("responses"),
    run: (l, t) => l.agent!(t, { model: "responses", turns: USER_TURNS, stream: true }),
    check: (turns) => expectAgentTurns(turns),
  },
  {
    name: "Responses, previous_response_id, 3 turns",
    applies: (l) => l.respond !== undefined,
    run: async (l, t) => {
      const turns: TurnOutcome[] = [];
      for (const [i, input] of USER_TURNS.entries()) {
        const previous = turns[turns.length - 1]?.id;
        turns.push(
          await l.respond!(t, {
            input,
            stream: i === 1,
            maxTokens: TEXT_MAX_TOKENS,
            ...(previous === undefined ? {} : { previousResponseId: previous }),
          }),
        );
      }
      return turns;
    },
    check: expectUsageOnEveryTurn,
  },
];

/** An agent turn is a tool call followed, once the tool has answered, by text: two model calls per user turn. */
function expectAgentTurns(turns: TurnOutcome[]): void {
  expect(turns.length).toBe(USER_TURNS.length * 2);
  for (let i = 0; i < turns.length; i += 2) expectToolRound(turns.slice(i, i + 2), 1);
  expectUsageOnEveryTurn(turns);
}

/** Printable ASCII, at most 256 bytes: the gateway's rule for X-Session-Id. */
function sessionIdFor(library: string, caseName: string): string {
  return `${library}/${caseName}`.replace(/[^A-Za-z0-9._/-]+/g, "-").slice(0, 200);
}

function expectSameOnBothPaths(direct: TurnOutcome[], viaGateway: TurnOutcome[], rig: Rig): void {
  const directExchanges = generationExchanges(rig.direct);
  const gatewayExchanges = generationExchanges(rig.gateway);
  expect(gatewayExchanges.length, "engine calls through the gateway").toBe(directExchanges.length);
  const directIds = engineIdNames(directExchanges);
  const gatewayIds = engineIdNames(gatewayExchanges);
  for (const [i, exchange] of directExchanges.entries()) {
    const asked = askedUsage(exchange);
    expect(engineRequest(gatewayExchanges[i]!, asked, gatewayIds), `engine request ${i}`).toEqual(
      engineRequest(exchange, asked, directIds),
    );
  }
  expect(viaGateway.map(pathIndependent)).toEqual(direct.map(pathIndependent));
}

function runBothPaths(library: ClientLibrary, c: ClientCase): () => Promise<void> {
  return async () => {
    const rig = await startRig(sessionIdFor(library.name, c.name), c.sim);
    try {
      const direct = await c.run(library, rig.direct);
      const directExchanges = generationExchanges(rig.direct);
      expect(directExchanges.length, "one engine call per model call").toBe(direct.length);
      for (const [i, turn] of direct.entries()) {
        expectTurnMatchesEngine(turn, directExchanges[i]!, `direct turn ${i}`);
        expect(turn.agentServe, "an engine sends no x_agent_serve").toBeUndefined();
      }
      c.check?.(direct);

      const viaGateway = await c.run(library, rig.gateway);
      const gatewayExchanges = generationExchanges(rig.gateway);
      expect(gatewayExchanges.length, "one engine call per model call").toBe(viaGateway.length);
      for (const [i, turn] of viaGateway.entries()) {
        expectTurnMatchesEngine(turn, gatewayExchanges[i]!, `gateway turn ${i}`);
        expect(turn.agentServe, `gateway turn ${i}: x_agent_serve readable`).toBeDefined();
        expect(turn.agentServe!.sessionId).toBe(rig.gateway.sessionId);
        // One session, so only its first request is a miss; every later one lands on the same engine.
        expect(turn.agentServe!.affinityHit, `gateway turn ${i}: affinity_hit`).toBe(i > 0);
      }
      expect(new Set(gatewayExchanges.map((e) => e.engine)).size, "one engine served the session").toBe(1);
      c.check?.(viaGateway);
      expectSameOnBothPaths(direct, viaGateway, rig);
    } finally {
      await rig.close();
    }
  };
}

/** Registers every case that applies to `library` (Hono's common.case.test.ts pattern). */
export function runClientCases(library: ClientLibrary): void {
  describe(library.name, () => {
    for (const c of CLIENT_CASES) {
      if (c.applies(library)) it(c.name, runBothPaths(library, c));
    }
  });
}
