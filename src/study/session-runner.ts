// Closed-loop load: a fixed number of workers, each running whole sessions turn by turn, with think time.
import type { Pool } from "undici";
import type { Progress } from "./progress.js";
import { EXACT_LENGTH, sendChatTurn, type ChatTurnResult } from "./chat-client.js";
import type { SessionPlan } from "./workload.js";
import { pause } from "./pause.js";

export interface RequestRecord extends ChatTurnResult {
  condition: string;
  sessionId: string;
  /** 1-based turn number within the session. */
  turn: number;
  /** Wall-clock ms since the condition started. */
  startMs: number;
}

export interface RunOptions {
  condition: string;
  sessions: readonly SessionPlan[];
  concurrency: number;
  pool: Pool;
  /** Think time is simulated time: it is divided by this to get the wall-clock pause. */
  timeScale: number;
  stream: boolean;
  model?: string;
  tierHint?: string;
  /** Called after every request (progress display, live timelines). */
  onRecord?: (record: RequestRecord) => void;
  /** Checked before every turn: a time-boxed run (the failure study) stops starting new turns. */
  shouldStop?: () => boolean;
  /** false: no X-Session-Id is sent (the gateway places each turn by its prompt). Default true. */
  sendSessionIds?: boolean;
  /** Wall-clock ms since the condition started, when other traffic of the condition shares its clock. */
  now?: () => number;
  /** Worker i starts after i x this many simulated ms (arrivals spread out instead of one burst). */
  startGapMs?: number;
}

/** The messages of one turn: the session's history so far, then the new user message or tool result. */
export function appendTurn(history: unknown[], session: SessionPlan, turnIndex: number): void {
  const turn = session.turns[turnIndex]!;
  if (turn.toolCall) {
    const id = `call_${turnIndex}`;
    history.push({
      role: "assistant",
      content: null,
      tool_calls: [
        { id, type: "function", function: { name: turn.toolCall.name, arguments: turn.toolCall.arguments } },
      ],
    });
    history.push({ role: "tool", tool_call_id: id, content: turn.toolCall.result });
  } else {
    history.push({ role: "user", content: turn.userMessage });
  }
}

export async function runSessions(options: RunOptions): Promise<RequestRecord[]> {
  const started = performance.now();
  const now = options.now ?? ((): number => performance.now() - started);
  const records: RequestRecord[] = [];
  let next = 0;
  const worker = async (index: number): Promise<void> => {
    await pause(((options.startGapMs ?? 0) * index) / options.timeScale);
    while (next < options.sessions.length) {
      const session = options.sessions[next++]!;
      const history: unknown[] = [{ role: "system", content: session.systemPrompt }];
      for (let t = 0; t < session.turns.length; t++) {
        if (options.shouldStop?.()) return;
        appendTurn(history, session, t);
        const startMs = now();
        const result = await sendChatTurn(
          options.pool,
          {
            sessionId: options.sendSessionIds === false ? undefined : session.id,
            messages: history,
            maxTokens: session.turns[t]!.maxTokens,
            stream: options.stream,
            extraBody: EXACT_LENGTH,
            ...(options.model === undefined ? {} : { model: options.model }),
            ...(options.tierHint === undefined ? {} : { tierHint: options.tierHint }),
          },
          now,
        );
        const record: RequestRecord = {
          ...result,
          condition: options.condition,
          sessionId: session.id,
          turn: t + 1,
          startMs,
        };
        records.push(record);
        options.onRecord?.(record);
        history.push({ role: "assistant", content: result.reply });
        if (t + 1 < session.turns.length) await pause(session.thinkTimeMs / options.timeScale);
      }
    }
  };
  await Promise.all(
    Array.from({ length: Math.min(options.concurrency, options.sessions.length) }, (_, i) => worker(i)),
  );
  return records;
}

/**
 * One condition of a study as they all run it: streamed turns to the small tier, a progress bar labelled
 * `label` over every turn of every session.
 */
export async function runCondition(
  label: string,
  condition: string,
  sessions: readonly SessionPlan[],
  concurrency: number,
  target: { pool: Pool; timeScale: number },
  progress: Progress,
): Promise<RequestRecord[]> {
  progress.start(
    label,
    sessions.reduce((n, s) => n + s.turns.length, 0),
  );
  const records = await runSessions({
    condition,
    sessions,
    concurrency,
    pool: target.pool,
    timeScale: target.timeScale,
    stream: true,
    tierHint: "small",
    onRecord: (r) => progress.tick(!r.ok),
  });
  progress.done();
  return records;
}
