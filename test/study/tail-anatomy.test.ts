// The tail anatomy of a placement study: which requests a p99 is read from, and where their time went.
import { describe, expect, it } from "vitest";
import type { RequestRecord } from "../../src/study/session-runner.js";
import { tailAnatomy } from "../../src/study/tail-anatomy.js";

function record(fields: Partial<RequestRecord>): RequestRecord {
  return {
    condition: "c",
    sessionId: "s",
    turn: 2,
    startMs: 0,
    status: 200,
    ok: true,
    ttftMs: 10,
    e2eMs: 20,
    reply: "",
    backend: "e0",
    tier: "small",
    affinityHit: true,
    reason: "affinity_hit",
    attempts: 1,
    queueWaitMs: 0,
    promptTokens: 1000,
    cachedTokens: 900,
    completionTokens: 10,
    ...fields,
  };
}

describe("tailAnatomy", () => {
  it("reads the slowest 1% (at least two) and splits their TTFT into queue wait and the rest", () => {
    const records = [
      ...Array.from({ length: 150 }, (_, i) => record({ sessionId: `o${i}`, ttftMs: 10 + (i % 7) })),
      record({ sessionId: "hot", ttftMs: 400, queueWaitMs: 350, cachedTokens: 950 }),
      record({ sessionId: "o1", turn: 1, ttftMs: 300, queueWaitMs: 0, cachedTokens: 0 }),
    ];
    const anatomy = tailAnatomy(records, 10, (r) => r.sessionId === "hot");
    expect(anatomy.tailRequests).toBe(2);
    expect(anatomy.tailHot).toBe(1);
    expect(anatomy.tailFirstTurns).toBe(1);
    // Median of 3.5 s and 0 s queued (times 10: simulated seconds), and of 0.5 s and 3 s elsewhere.
    expect(anatomy.tailQueueSeconds).toBeCloseTo(1.75);
    expect(anatomy.tailEngineSeconds).toBeCloseTo(1.75);
    expect(anatomy.tailCachedFraction).toBeCloseTo(0.475);
  });

  it("counts spills, the warm ones, and those to an engine the session had used before", () => {
    const records = [
      record({ sessionId: "a", startMs: 0, backend: "e0", reason: "new_session", cachedTokens: 0 }),
      record({ sessionId: "a", startMs: 1, backend: "e1", reason: "spill", cachedTokens: 100 }),
      record({ sessionId: "a", startMs: 2, backend: "e1", reason: "spill", cachedTokens: 800 }),
      record({ sessionId: "b", startMs: 3, backend: "e1", reason: "spill", cachedTokens: 600 }),
      record({ sessionId: "b", startMs: 4, backend: "e2", reason: "spill", ok: false }),
    ];
    expect(tailAnatomy(records, 1, () => false)).toMatchObject({
      spills: 3,
      warmSpills: 2,
      spillsToVisited: 1,
    });
  });
});
