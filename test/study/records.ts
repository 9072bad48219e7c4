// Test fixture: a study's request record, as a session runner writes one, with the fields a test cares about.
import type { RequestRecord } from "../../src/study/session-runner.js";

/** Turn `turn` of the condition's one session, a 200 on small-0 (a binding hit after turn 1), with `fields` over it. */
export function studyRecord(
  condition: string,
  turn: number,
  fields: Partial<RequestRecord> = {},
): RequestRecord {
  return {
    condition,
    sessionId: `${condition}-s`,
    turn,
    startMs: 0,
    status: 200,
    ok: true,
    ttftMs: 100,
    e2eMs: 1000,
    reply: "",
    backend: "small-0",
    tier: "small",
    affinityHit: turn > 1,
    reason: turn > 1 ? "affinity_hit" : "new_session",
    attempts: 1,
    queueWaitMs: 0,
    promptTokens: 1000,
    cachedTokens: turn > 1 ? 800 : 0,
    completionTokens: 10,
    ...fields,
  };
}
