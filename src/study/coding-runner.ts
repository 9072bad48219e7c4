// Runs coding-agent sessions as the agents send them: every session at once, each call on its thread's growing
// history, sub-agent bursts in parallel while the parent waits, the client's own session signal on every call.
import type { Dispatcher } from "undici";
import { EXACT_LENGTH, sendChatTurn } from "./chat-client.js";
import type { CodingCall, CodingSessionPlan } from "./coding-workload.js";
import type { RequestRecord } from "./session-runner.js";
import { pause } from "./pause.js";

export interface CodingRecord extends RequestRecord {
  /** The session's own conversation, or one of its sub-agents. */
  thread: "main" | "subagent";
}

/** When a session's sub-agents ran (wall-clock ms since the condition started). */
export interface BurstWindow {
  sessionId: string;
  size: number;
  startMs: number;
  endMs: number;
}

export interface CodingRunOptions {
  condition: string;
  sessions: readonly CodingSessionPlan[];
  /** A Pool to one gateway, or a BalancedPool spreading the calls over replicas. */
  target: { pool: Dispatcher; timeScale: number };
  /** The headers a session's calls carry (its client's session signal, or none). */
  sessionHeaders: (sessionId: string) => Readonly<Record<string, string>>;
  /** Simulated ms between the sessions' starts, so they do not all open at the same instant. */
  startGapMs: number;
  now: () => number;
  onRecord: (record: CodingRecord) => void;
}

/** Appends a call's preceding message: a user turn, or the previous reply's tool call and its result. */
function appendMessage(history: unknown[], call: CodingCall, index: number): void {
  const message = call.message;
  if (message.kind === "user") {
    history.push({ role: "user", content: message.text });
    return;
  }
  const id = `call_${index}`;
  history.push({
    role: "assistant",
    content: null,
    tool_calls: [{ id, type: "function", function: { name: message.name, arguments: message.arguments } }],
  });
  history.push({ role: "tool", tool_call_id: id, content: message.result });
}

export async function runCodingSessions(
  options: CodingRunOptions,
): Promise<{ records: CodingRecord[]; bursts: BurstWindow[] }> {
  const records: CodingRecord[] = [];
  const bursts: BurstWindow[] = [];
  const { pool, timeScale } = options.target;

  /** One thread's calls in order; returns its last reply. */
  const runThread = async (
    session: CodingSessionPlan,
    thread: CodingRecord["thread"],
    systemPrompt: string,
    calls: readonly CodingCall[],
    afterCall?: (index: number, history: unknown[]) => Promise<void>,
  ): Promise<string> => {
    const history: unknown[] = [{ role: "system", content: systemPrompt }];
    let reply = "";
    for (const [index, call] of calls.entries()) {
      await pause(call.thinkMs / timeScale);
      appendMessage(history, call, index);
      const startMs = options.now();
      const result = await sendChatTurn(
        pool,
        {
          sessionId: undefined,
          headers: options.sessionHeaders(session.id),
          messages: history,
          maxTokens: call.replyTokens,
          stream: true,
          tierHint: "small",
          // Exact reply lengths: every condition replays the same tokens.
          extraBody: EXACT_LENGTH,
        },
        options.now,
      );
      const record: CodingRecord = {
        ...result,
        condition: options.condition,
        sessionId: session.id,
        turn: index + 1,
        startMs,
        thread,
      };
      records.push(record);
      options.onRecord(record);
      reply = result.reply;
      history.push({ role: "assistant", content: reply });
      await afterCall?.(index, history);
    }
    return reply;
  };

  await Promise.all(
    options.sessions.map(async (session, s) => {
      await pause((options.startGapMs * s) / timeScale);
      const burst = session.burst;
      await runThread(session, "main", session.systemPrompt, session.calls, async (index, history) => {
        if (burst === undefined || index !== burst.afterCall) return;
        const startMs = options.now();
        const replies = await Promise.all(
          burst.subagents.map((sub) => runThread(session, "subagent", burst.systemPrompt, sub.calls)),
        );
        bursts.push({ sessionId: session.id, size: burst.subagents.length, startMs, endMs: options.now() });
        // The parent reads its sub-agents' reports as the result of its task tool.
        const id = `call_task_${index}`;
        history.push({
          role: "assistant",
          content: null,
          tool_calls: [{ id, type: "function", function: { name: "Task", arguments: "{}" } }],
        });
        history.push({
          role: "tool",
          tool_call_id: id,
          content: replies.map((r) => r.slice(0, 400)).join("\n"),
        });
      });
    }),
  );
  return { records, bursts };
}
