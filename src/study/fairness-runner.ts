// Interactive agents (one turn at a time, short think times) beside batch agents firing sub-agent bursts back to
// back: the fairness study's traffic, with each interactive task's start and end (its program latency).
import type { Pool } from "undici";
import { SeededRandom } from "../core/random.js";
import { sendChatTurn } from "./chat-client.js";
import type { RequestRecord } from "./session-runner.js";
import { pause } from "./pause.js";

export interface FairnessSpec {
  seed: number;
  /** Prefixes session ids, so that conditions never share bindings. */
  idPrefix: string;
  interactiveAgents: number;
  /** Tasks each interactive agent works through, one after the other. */
  tasks: number;
  /** Calls per task, each waiting for the previous one's reply and a think time. */
  turnsPerTask: number;
  /** Simulated seconds between a reply and the next call (tools running, a person reading). */
  thinkSeconds: { min: number; max: number };
  interactivePromptChars: number;
  interactiveReplyTokens: number;
  batchAgents: number;
  /** Sub-agent calls each batch agent fires at once; the next burst follows when the last call of one ends. */
  burstSize: number;
  batchPromptChars: number;
  batchReplyTokens: number;
  /**
   * Simulated seconds the batch agents run before the interactive agents start and the window opens: the
   * engines are full and past their first prefills, so a short window is not charged the ramp.
   */
  batchLeadSeconds: number;
}

export interface FairnessRecord extends RequestRecord {
  agent: string;
  kind: "interactive" | "batch";
}

/** One interactive task: from its first call to its last reply (wall-clock ms since the condition started). */
export interface ProgramRecord {
  agent: string;
  task: number;
  startMs: number;
  endMs: number;
}

export interface FairnessRun {
  records: FairnessRecord[];
  programs: ProgramRecord[];
  /** When the interactive agents started and when the last of their tasks ended: throughput's window. */
  windowStartMs: number;
  windowEndMs: number;
  /** Tokens the engines generated in the window (their own counters), when the study could read them. */
  windowTokens: number | undefined;
}

const WORDS = [
  "plan",
  "read",
  "edit",
  "test",
  "diff",
  "file",
  "build",
  "lint",
  "patch",
  "trace",
  "grep",
  "log",
];

function text(random: SeededRandom, chars: number, tag: string): string {
  let out = `${tag}:`;
  while (out.length < chars) out += ` ${WORDS[random.int(WORDS.length)]}`;
  return out;
}

export async function runFairnessTraffic(options: {
  spec: FairnessSpec;
  condition: string;
  target: { pool: Pool; timeScale: number };
  /** false: the interactive agents alone (their unloaded program latency). */
  batch: boolean;
  now: () => number;
  onRecord: (record: FairnessRecord) => void;
  /** The engines' generated tokens so far (read at the start and at the end of the window), if readable. */
  engineTokens?: () => Promise<number>;
}): Promise<FairnessRun> {
  const { spec, target, now } = options;
  const { pool, timeScale } = target;
  const records: FairnessRecord[] = [];
  const programs: ProgramRecord[] = [];
  let stopped = false;

  const call = async (
    agent: string,
    kind: FairnessRecord["kind"],
    sessionId: string,
    turn: number,
    messages: unknown[],
    maxTokens: number,
  ): Promise<FairnessRecord> => {
    const startMs = now();
    const result = await sendChatTurn(
      pool,
      {
        sessionId,
        headers: { "x-agent-id": agent },
        messages,
        maxTokens,
        // Interactive calls stream (their TTFT is measured); exact reply lengths in every condition.
        stream: kind === "interactive",
        tierHint: "small",
        extraBody: { ignore_eos: true },
      },
      now,
    );
    const record: FairnessRecord = {
      ...result,
      condition: options.condition,
      sessionId,
      turn,
      startMs,
      agent,
      kind,
    };
    records.push(record);
    options.onRecord(record);
    return record;
  };

  const interactive = async (i: number): Promise<void> => {
    const random = new SeededRandom(spec.seed * 1000 + i);
    const agent = `interactive-${i}`;
    // Agents start a little apart, as users do.
    await pause((random.next() * spec.thinkSeconds.max * 1000) / timeScale);
    for (let task = 0; task < spec.tasks; task++) {
      const sessionId = `${spec.idPrefix}-${agent}-task${task}`;
      const history: unknown[] = [
        { role: "system", content: text(random, spec.interactivePromptChars, `${agent} system`) },
      ];
      const startMs = now();
      for (let turn = 1; turn <= spec.turnsPerTask; turn++) {
        history.push({ role: "user", content: text(random, 200, `${sessionId} turn ${turn}`) });
        const record = await call(
          agent,
          "interactive",
          sessionId,
          turn,
          history,
          spec.interactiveReplyTokens,
        );
        history.push({ role: "assistant", content: record.reply });
        if (turn < spec.turnsPerTask) {
          const think =
            spec.thinkSeconds.min + random.next() * (spec.thinkSeconds.max - spec.thinkSeconds.min);
          await pause((think * 1000) / timeScale);
        }
      }
      programs.push({ agent, task, startMs, endMs: now() });
    }
  };

  const batch = async (j: number): Promise<void> => {
    const random = new SeededRandom(spec.seed * 1000 + 500 + j);
    const agent = `batch-${j}`;
    const system = text(random, spec.batchPromptChars, `${agent} sub-agent system`);
    for (let burst = 0; !stopped; burst++) {
      await Promise.all(
        Array.from({ length: spec.burstSize }, (_, n) =>
          call(
            agent,
            "batch",
            `${spec.idPrefix}-${agent}-burst${burst}-${n}`,
            1,
            [
              { role: "system", content: system },
              { role: "user", content: text(random, 400, `${agent} burst ${burst} sub-agent ${n}`) },
            ],
            spec.batchReplyTokens,
          ),
        ),
      );
    }
  };

  const batches = options.batch ? Array.from({ length: spec.batchAgents }, (_, j) => batch(j)) : [];
  if (options.batch) await pause((spec.batchLeadSeconds * 1000) / timeScale);
  const tokensBefore = await options.engineTokens?.();
  const windowStartMs = now();
  await Promise.all(Array.from({ length: spec.interactiveAgents }, (_, i) => interactive(i)));
  const windowEndMs = now();
  // Token by token, calls still running included: counting only finished calls would favour long windows.
  const tokensAfter = await options.engineTokens?.();
  stopped = true;
  await Promise.all(batches);
  const windowTokens =
    tokensBefore === undefined || tokensAfter === undefined ? undefined : tokensAfter - tokensBefore;
  return { records, programs, windowStartMs, windowEndMs, windowTokens };
}
