// The run's summary as a study result: hit rate, warm vs cold TTFT, cache share, tools, checks.
import type { RequestRecord } from "../study/session-runner.js";
import type { Check, StudyResult, Table } from "../study/result.js";
import { percentile, ratio } from "../study/stats.js";
import type { AgentRun } from "./fleet.js";
import type { ModelStep } from "./model-call.js";

export interface SummaryInput {
  runs: readonly AgentRun[];
  toolNames: readonly string[];
  /** Engine time per wall time (embedded simulated engines); 1 against a gateway someone else runs. */
  timeScale: number;
  seed: number;
  maxSteps: number;
  configs: unknown[];
}

interface CallRow {
  agent: string;
  sessionId: string;
  turn: number;
  /** 0 for the session's first model call. */
  indexInSession: number;
  step: ModelStep;
}

function callRows(runs: readonly AgentRun[]): CallRow[] {
  const rows: CallRow[] = [];
  for (const run of runs) {
    let index = 0;
    for (const turn of run.turns)
      for (const step of turn.steps)
        rows.push({
          agent: run.agent,
          sessionId: run.sessionId,
          turn: turn.turn,
          indexInSession: index++,
          step,
        });
  }
  return rows;
}

const ms = (value: number): string => (Number.isFinite(value) ? `${Math.round(value)} ms` : "n/a");
const pct = (value: number): string => `${(value * 100).toFixed(1)}%`;

export function summarize(input: SummaryInput): StudyResult {
  const rows = callRows(input.runs);
  const engineMs = (wallMs: number): number => wallMs * input.timeScale;
  const answered = rows.filter((row) => row.step.error === undefined);
  const placed = rows.filter((row) => row.step.affinityHit !== null);
  const hits = placed.filter((row) => row.step.affinityHit === true).length;
  const later = placed.filter((row) => row.indexInSession > 0);
  const laterHits = later.filter((row) => row.step.affinityHit === true).length;
  const ttft = (list: CallRow[]): number[] =>
    list.flatMap((row) => (row.step.ttftMs === null ? [] : [engineMs(row.step.ttftMs)]));
  const coldTtft = ttft(answered.filter((row) => row.indexInSession === 0));
  const warmTtft = ttft(answered.filter((row) => row.indexInSession > 0 && row.step.affinityHit === true));
  const promptTokens = answered.reduce((sum, row) => sum + row.step.promptTokens, 0);
  const cachedTokens = answered.reduce((sum, row) => sum + row.step.cachedTokens, 0);
  const turns = input.runs.flatMap((run) => run.turns);
  const completedTurns = turns.filter((turn) => turn.completed).length;
  const toolCalls = turns.flatMap((turn) => turn.toolCalls);

  const fleet: Table = {
    title: "Fleet",
    columns: [
      "agents",
      "turns",
      "model calls",
      "tool calls",
      "hit rate",
      "TTFT p50 cold",
      "TTFT p50 warm",
      "cached prompt tokens",
    ],
    rows: [
      [
        input.runs.length,
        `${completedTurns}/${turns.length}`,
        rows.length,
        toolCalls.length,
        pct(ratio(hits, placed.length)),
        ms(percentile(coldTtft, 50)),
        ms(percentile(warmTtft, 50)),
        `${cachedTokens}/${promptTokens} (${pct(ratio(cachedTokens, promptTokens))})`,
      ],
    ],
  };

  const sessions: Table = {
    title: "Sessions",
    columns: [
      "agent",
      "session",
      "engines",
      "model calls",
      "affinity hits",
      "first call",
      "tool calls",
      "cached share",
    ],
    rows: input.runs.map((run) => {
      const own = rows.filter((row) => row.sessionId === run.sessionId);
      const engines = [
        ...new Set(own.flatMap((row) => (row.step.backend === null ? [] : [row.step.backend]))),
      ];
      const prompt = own.reduce((sum, row) => sum + row.step.promptTokens, 0);
      const cached = own.reduce((sum, row) => sum + row.step.cachedTokens, 0);
      return [
        run.agent,
        run.sessionId,
        engines.join(", ") || "none",
        own.length,
        own.filter((row) => row.step.affinityHit === true).length,
        own[0]?.step.reason ?? (own[0]?.step.affinityHit === false ? "miss" : "n/a"),
        run.turns.reduce((sum, turn) => sum + turn.toolCalls.length, 0),
        pct(ratio(cached, prompt)),
      ];
    }),
  };

  const tools: Table = {
    title: "Tool calls by tool",
    columns: ["tool", "calls", "ok", "error results", "p50 duration"],
    rows: input.toolNames.map((name) => {
      const own = toolCalls.filter((call) => call.name === name);
      const ok = own.filter((call) => call.ok).length;
      return [
        name,
        own.length,
        ok,
        own.length - ok,
        ms(
          percentile(
            own.map((call) => call.durationMs),
            50,
          ),
        ),
      ];
    }),
  };
  const unknownTools = toolCalls.filter((call) => !input.toolNames.includes(call.name)).length;
  if (unknownTools > 0) tools.rows.push(["(unknown tool names)", unknownTools, 0, unknownTools, "n/a"]);

  const reasonCounts = new Map<string, number>();
  for (const row of rows) {
    const key =
      row.step.error !== undefined
        ? `error ${row.step.status}`
        : (row.step.reason ?? (row.step.affinityHit ? "hit" : "miss"));
    reasonCounts.set(key, (reasonCounts.get(key) ?? 0) + 1);
  }
  const reasons: Table = {
    title: "Model calls by placement reason",
    columns: ["reason", "calls"],
    rows: [...reasonCounts.entries()].sort(([a], [b]) => a.localeCompare(b)),
  };

  const enginesPerSession = input.runs.map(
    (run) =>
      new Set(
        rows
          .filter((r) => r.sessionId === run.sessionId && r.step.backend !== null)
          .map((r) => r.step.backend),
      ).size,
  );
  const checks: Check[] = [
    {
      claim: "every turn ended with a text answer",
      passed: turns.length > 0 && completedTurns === turns.length,
      detail: `${completedTurns} of ${turns.length} turns; ${rows.length - answered.length} model calls failed`,
    },
    {
      claim: "the agents called tools and the tools ran",
      passed: toolCalls.length > 0,
      detail: `${toolCalls.length} tool calls, ${toolCalls.filter((c) => c.ok).length} with a result, the rest with an error result`,
    },
    {
      claim: "each session stayed on one engine",
      passed: enginesPerSession.length > 0 && enginesPerSession.every((count) => count === 1),
      detail: `engines per session: ${enginesPerSession.join(", ")}`,
    },
    {
      claim: "every model call after a session's first was an affinity hit",
      passed: later.length > 0 && laterHits === later.length,
      detail: `${laterHits} of ${later.length}`,
    },
  ];

  const records: RequestRecord[] = rows.map((row) => ({
    condition: row.agent,
    sessionId: row.sessionId,
    turn: row.turn,
    startMs: 0,
    status: row.step.status,
    ok: row.step.error === undefined,
    ...(row.step.error === undefined ? {} : { error: row.step.error }),
    ttftMs: row.step.ttftMs === null ? null : engineMs(row.step.ttftMs),
    e2eMs: engineMs(row.step.e2eMs),
    reply: row.step.content,
    backend: row.step.backend,
    tier: row.step.tier,
    affinityHit: row.step.affinityHit,
    reason: row.step.reason,
    attempts: null,
    queueWaitMs: null,
    promptTokens: row.step.promptTokens,
    cachedTokens: row.step.cachedTokens,
    completionTokens: row.step.completionTokens,
  }));

  return {
    study: "agent",
    title: "Demo agent fleet",
    description:
      `${input.runs.length} tool-using agents, one session each, ${turns.length / Math.max(1, input.runs.length)} ` +
      `user turns per agent, at most ${input.maxSteps} model calls per turn (model, tool calls, tool results, ` +
      "model, ... until a text answer), through the openai SDK. Cold TTFT: each session's first model call; " +
      "warm: its later calls that were affinity hits.",
    seed: input.seed,
    timeScale: input.timeScale,
    configs: input.configs,
    records,
    tables: [fleet, sessions, tools, reasons],
    charts: [],
    checks,
    notes: [
      "TTFT is measured by the agent from sending the request to the first streamed chunk with text or a tool call.",
      "A call's placement comes from the gateway's X-Agent-Serve-Backend and X-Agent-Serve-Affinity-Hit headers.",
    ],
    data: {
      agents: input.runs.length,
      turns: turns.length,
      completedTurns,
      modelCalls: rows.length,
      failedModelCalls: rows.length - answered.length,
      affinityHitRate: ratio(hits, placed.length),
      laterCallHits: laterHits,
      laterCalls: later.length,
      ttftP50ColdMs: percentile(coldTtft, 50),
      ttftP50WarmMs: percentile(warmTtft, 50),
      promptTokens,
      cachedTokens,
      toolCalls: Object.fromEntries(
        input.toolNames.map((name) => [name, toolCalls.filter((c) => c.name === name).length]),
      ),
      enginesPerSession: Object.fromEntries(
        input.runs.map((run, i) => [run.sessionId, enginesPerSession[i]]),
      ),
    },
  };
}
