// Agent traffic the placement studies need beyond whole sessions: hot sessions that fan out parallel calls, and session-less requests.
import type { Pool } from "undici";
import { EXACT_LENGTH, sendChatTurn } from "./chat-client.js";
import type { RequestRecord } from "./session-runner.js";
import { pause } from "./pause.js";

/** A session that plans, then fans out `calls.length` parallel tool-agent calls, round after round. */
export interface HotSessionPlan {
  id: string;
  systemPrompt: string;
  rounds: { userMessage: string; calls: string[] }[];
  maxTokens: number;
  thinkTimeMs: number;
}

/** One request without a session: a template's system prompt (and tools text) and a user message. */
export interface SessionlessRequest {
  template: string;
  systemPrompt: string;
  userMessage: string;
  maxTokens: number;
}

interface Target {
  pool: Pool;
  timeScale: number;
}

/** Runs each hot session's rounds; a round's calls go out at once, each on the session's history so far. */
export async function runHotSessions(
  condition: string,
  sessions: readonly HotSessionPlan[],
  target: Target,
  options: { sendSessionIds: boolean; now: () => number; onRecord: (r: RequestRecord) => void },
): Promise<RequestRecord[]> {
  const records: RequestRecord[] = [];
  await Promise.all(
    sessions.map(async (session) => {
      const history: unknown[] = [{ role: "system", content: session.systemPrompt }];
      for (const [roundIndex, round] of session.rounds.entries()) {
        history.push({ role: "user", content: round.userMessage });
        const turn = roundIndex + 1;
        const results = await Promise.all(
          round.calls.map(async (call) => {
            const startMs = options.now();
            const result = await sendChatTurn(
              target.pool,
              {
                sessionId: options.sendSessionIds ? session.id : undefined,
                messages: [...history, { role: "user", content: call }],
                maxTokens: session.maxTokens,
                stream: true,
                extraBody: EXACT_LENGTH,
                tierHint: "small",
              },
              options.now,
            );
            const record: RequestRecord = { ...result, condition, sessionId: session.id, turn, startMs };
            records.push(record);
            options.onRecord(record);
            return result;
          }),
        );
        history.push({ role: "assistant", content: results[0]?.reply ?? "" });
        if (turn < session.rounds.length) await pause(session.thinkTimeMs / target.timeScale);
      }
    }),
  );
  return records;
}

/** Session-less requests in the given order, `concurrency` at a time (a closed loop, no think time). */
export async function runSessionless(
  condition: string,
  requests: readonly SessionlessRequest[],
  concurrency: number,
  target: Target,
  options: { now: () => number; onRecord: (r: RequestRecord) => void },
): Promise<RequestRecord[]> {
  const records: RequestRecord[] = [];
  const seen = new Map<string, number>();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < requests.length) {
      const request = requests[next++]!;
      const turn = (seen.get(request.template) ?? 0) + 1;
      seen.set(request.template, turn);
      const startMs = options.now();
      const result = await sendChatTurn(
        target.pool,
        {
          sessionId: undefined,
          messages: [
            { role: "system", content: request.systemPrompt },
            { role: "user", content: request.userMessage },
          ],
          maxTokens: request.maxTokens,
          stream: true,
          extraBody: EXACT_LENGTH,
          tierHint: "small",
        },
        options.now,
      );
      // The template stands in for the session: `turn` counts its requests, so turn 1 is its cold one.
      const record: RequestRecord = { ...result, condition, sessionId: request.template, turn, startMs };
      records.push(record);
      options.onRecord(record);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, requests.length) }, worker));
  return records;
}
