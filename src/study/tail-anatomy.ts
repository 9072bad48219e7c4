// Where the slowest requests' time to first token goes (gateway queue wait or engine), and which spills found a warm cache.
import { simSeconds } from "./analysis.js";
import type { RequestRecord } from "./session-runner.js";
import { percentile } from "./stats.js";

export interface TailAnatomy {
  /** The slowest 1% of the requests by TTFT (at least 2): the requests a p99 is read from. */
  tailRequests: number;
  /** Of those, how many are calls of a hot (fanned-out) session. */
  tailHot: number;
  /** Of those, how many are a session's first turn. */
  tailFirstTurns: number;
  /** Median over the tail of the wait at the gateway for a slot, simulated seconds. */
  tailQueueSeconds: number;
  /** Median over the tail of TTFT minus that wait (the engine's prefill and first step, plus transport). */
  tailEngineSeconds: number;
  /** Median over the tail of the fraction of the prompt the engine found cached. */
  tailCachedFraction: number;
  spills: number;
  /** Spills that found at least half of their prompt cached on the engine they spilled to. */
  warmSpills: number;
  /** Spills to an engine the session had sent a request to before (spilled or bound there). */
  spillsToVisited: number;
}

/** A spill is warm when at least this fraction of its prompt came from the target engine's prefix cache. */
export const WARM_FRACTION = 0.5;

export function tailAnatomy(
  records: readonly RequestRecord[],
  timeScale: number,
  isHot: (record: RequestRecord) => boolean,
): TailAnatomy {
  const timed = records.filter((r) => r.ok && r.ttftMs !== null);
  const count = Math.max(2, Math.ceil(timed.length / 100));
  const tail = [...timed].sort((a, b) => b.ttftMs! - a.ttftMs!).slice(0, count);
  const queue = (r: RequestRecord): number => simSeconds(r.queueWaitMs ?? 0, timeScale);
  const cached = (r: RequestRecord): number => (r.promptTokens > 0 ? r.cachedTokens / r.promptTokens : 0);

  let spills = 0;
  let warmSpills = 0;
  let spillsToVisited = 0;
  // Requests in the order they were sent: a session's earlier backends are those of its earlier requests.
  const visited = new Map<string, Set<string>>();
  for (const r of [...records].sort((a, b) => a.startMs - b.startMs)) {
    if (!r.ok || r.backend === null) continue;
    const seen = visited.get(r.sessionId) ?? new Set<string>();
    if (r.reason === "spill") {
      spills++;
      if (cached(r) >= WARM_FRACTION) warmSpills++;
      if (seen.has(r.backend)) spillsToVisited++;
    }
    seen.add(r.backend);
    visited.set(r.sessionId, seen);
  }
  return {
    tailRequests: tail.length,
    tailHot: tail.filter(isHot).length,
    tailFirstTurns: tail.filter((r) => r.turn === 1 && !isHot(r)).length,
    tailQueueSeconds: percentile(tail.map(queue), 50),
    tailEngineSeconds: percentile(
      tail.map((r) => simSeconds(r.ttftMs!, timeScale) - queue(r)),
      50,
    ),
    tailCachedFraction: percentile(tail.map(cached), 50),
    spills,
    warmSpills,
    spillsToVisited,
  };
}
