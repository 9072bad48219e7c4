// Runs N agents at once, each its own session (X-Session-Id) with its own conversation, for T turns each.
import OpenAI from "openai";
import type { ChatCompletionMessageParam } from "openai/resources/chat/completions";
import { runTurn, type TurnRecord } from "./agent-loop.js";
import { gatewayModel, type ChatModel, type ModelStep } from "./model-call.js";
import { SYSTEM_PROMPT, taskFor } from "./tasks.js";
import type { ToolCallRecord, Toolbox } from "./toolbox.js";

export interface AgentRun {
  agent: string;
  sessionId: string;
  turns: TurnRecord[];
}

export interface FleetEvents {
  onStep(agent: string, turn: number, step: ModelStep, calls: readonly ToolCallRecord[]): void;
  onTurn(agent: string, record: TurnRecord): void;
}

export interface FleetOptions {
  agents: number;
  turns: number;
  maxSteps: number;
  toolbox: Toolbox;
  /** A model per session (the gateway through the SDK, with the session's headers). */
  modelFor(sessionId: string): ChatModel;
  /** Prefix of session ids: a run's sessions never meet an earlier run's bindings. */
  runId: string;
  events: FleetEvents;
}

export async function runFleet(options: FleetOptions): Promise<AgentRun[]> {
  const runs = Array.from({ length: options.agents }, (_unused, index) => runAgent(options, index));
  return Promise.all(runs);
}

async function runAgent(options: FleetOptions, index: number): Promise<AgentRun> {
  const agent = `agent-${index + 1}`;
  const sessionId = `${options.runId}-${agent}`;
  const model = options.modelFor(sessionId);
  const history: ChatCompletionMessageParam[] = [{ role: "system", content: SYSTEM_PROMPT }];
  const run: AgentRun = { agent, sessionId, turns: [] };
  for (let turn = 1; turn <= options.turns; turn++) {
    const record = await runTurn(history, taskFor(index, turn), turn, {
      model,
      toolbox: options.toolbox,
      maxSteps: options.maxSteps,
      onStep: (step, calls) => options.events.onStep(agent, turn, step, calls),
    });
    run.turns.push(record);
    options.events.onTurn(agent, record);
    // A failed turn leaves the conversation mid-way; the next turn still goes on, as a user would retry.
  }
  return run;
}

export interface GatewayClientOptions {
  baseUrl: string;
  apiKey: string;
  model: string;
  tierHint: string | undefined;
  maxTokens: number;
  timeoutMs: number;
  nowMs: () => number;
}

/** The SDK client of one session: its X-Session-Id (and tier hint) on every request it sends. */
export function sessionModel(options: GatewayClientOptions, sessionId: string): ChatModel {
  const client = new OpenAI({
    baseURL: `${options.baseUrl.replace(/\/+$/, "")}/v1`,
    apiKey: options.apiKey,
    // One attempt per call: the gateway does the failover; an SDK retry would hide what happened.
    maxRetries: 0,
    timeout: options.timeoutMs,
    defaultHeaders: {
      "X-Session-Id": sessionId,
      ...(options.tierHint === undefined ? {} : { "X-Tier-Hint": options.tierHint }),
    },
  });
  return gatewayModel({ client, model: options.model, maxTokens: options.maxTokens, nowMs: options.nowMs });
}
