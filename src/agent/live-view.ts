// What a person watches during a run: one redrawn line per agent on a terminal, plain lines otherwise.
import type { TurnRecord } from "./agent-loop.js";
import type { FleetEvents } from "./fleet.js";
import type { ModelStep } from "./model-call.js";
import type { ToolCallRecord } from "./toolbox.js";

interface AgentLine {
  turn: number;
  calls: number;
  tools: number;
  last: ModelStep | undefined;
  lastTools: readonly ToolCallRecord[];
}

export interface ViewOptions {
  agents: number;
  turns: number;
  /** Engine time per wall time: TTFT is shown in engine ms, as the summary reports it. */
  timeScale: number;
  write: (text: string) => void;
  /** Redraw lines in place (a terminal) or print one line per model call (a pipe, a log, CI). */
  tty: boolean;
}

function placement(step: ModelStep): string {
  if (step.error !== undefined) return `error ${step.status}: ${step.error.slice(0, 60)}`;
  const verdict =
    step.affinityHit === true ? "hit" : (step.reason ?? (step.affinityHit === false ? "miss" : "?"));
  return `${step.backend ?? "?"} ${verdict}`;
}

export function describeStep(step: ModelStep, calls: readonly ToolCallRecord[], timeScale: number): string {
  const ttft = step.ttftMs === null ? "ttft n/a" : `ttft ${Math.round(step.ttftMs * timeScale)} ms`;
  const cached = `cached ${step.cachedTokens}/${step.promptTokens}`;
  const tools =
    calls.length === 0 ? "answer" : `tools ${calls.map((c) => `${c.name}${c.ok ? "" : "!"}`).join(",")}`;
  return `${placement(step)}  ${ttft}  ${cached}  ${tools}`;
}

export function liveView(options: ViewOptions): FleetEvents & { finish(): void } {
  const lines = new Map<string, AgentLine>();
  for (let i = 1; i <= options.agents; i++)
    lines.set(`agent-${i}`, { turn: 0, calls: 0, tools: 0, last: undefined, lastTools: [] });
  let drawn = 0;
  const draw = (): void => {
    const text = [...lines.entries()].map(([agent, line]) => {
      const head = `${agent.padEnd(9)} turn ${String(line.turn).padStart(2)}/${options.turns}  calls ${String(line.calls).padStart(3)}  tools ${String(line.tools).padStart(3)}`;
      return line.last === undefined
        ? `${head}  waiting`
        : `${head}  ${describeStep(line.last, line.lastTools, options.timeScale)}`;
    });
    // Move up over the previous frame, clear each line, write the new one.
    options.write(
      (drawn > 0 ? `\x1b[${drawn}A` : "") + text.map((t) => `\x1b[2K${t.slice(0, 140)}\n`).join(""),
    );
    drawn = text.length;
  };
  if (options.tty) draw();
  return {
    onStep(agent, turn, step, calls) {
      const line = lines.get(agent)!;
      line.turn = turn;
      line.calls++;
      line.tools += calls.length;
      line.last = step;
      line.lastTools = calls;
      if (options.tty) draw();
      else
        options.write(
          `${agent} turn ${turn}/${options.turns} call ${line.calls}: ${describeStep(step, calls, options.timeScale)}\n`,
        );
    },
    onTurn(agent, record: TurnRecord) {
      if (!options.tty && !record.completed)
        options.write(
          `${agent} turn ${record.turn}/${options.turns} ended without an answer: ${record.error ?? "?"}\n`,
        );
    },
    finish() {
      if (options.tty) draw();
    },
  };
}
