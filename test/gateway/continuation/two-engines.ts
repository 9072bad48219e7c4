// The continuation tests' cluster: two simulated engines of one tier drawing the same replies (same seed), so an
// answer continued on the other engine must equal the answer without a fault; and an openai client of a session.
import OpenAI from "openai";
import type { SimFault } from "../../../src/sim/faults.js";
import { expect } from "vitest";
import { metricValue, scrape, startCluster, type Cluster } from "../../helpers/cluster.js";

/**
 * @param toolCallRate how often the engines answer with a tool call (1: always, when tools are offered)
 * @param profile a timed profile (about 12 ms a token) when a fault must strike while the answer is generated
 */
export async function twoEngines(
  overrides: Record<string, unknown> = {},
  toolCallRate = 0,
  profile = "instant",
): Promise<Cluster> {
  const sim = { seed: 11, toolCallRate, profile };
  return startCluster(
    [
      { id: "e1", tier: "small", sim },
      { id: "e2", tier: "small", sim },
    ],
    { health: { probe_interval_seconds: 60 }, ...overrides },
  );
}

/** The official openai client of one session, without retries (a retry would hide a broken stream). */
export function sessionClient(cluster: Cluster, session: string): OpenAI {
  return new OpenAI({
    baseURL: `${cluster.url}/v1`,
    apiKey: "none",
    maxRetries: 0,
    defaultHeaders: { "x-session-id": session },
  });
}

/** A fault case: its name, the engines' profile, the fault, and the config it needs. */
export type FaultCase = [string, string, SimFault, Record<string, unknown>];

/**
 * The three ways an engine breaks a stream: its connection cut after `cutAfter` events, its sockets destroyed
 * (die) or its tokens stopped (hang) mid-answer; the last two strike while a timed profile generates.
 */
export function engineFaults(cutAfter: number): FaultCase[] {
  return [
    [
      `cut_stream (the connection drops after ${cutAfter} events)`,
      "instant",
      { kind: "cut_stream", afterChunks: cutAfter },
      {},
    ],
    ["die (every socket destroyed mid-answer)", "qwen2.5-7b", { kind: "die" }, {}],
    [
      "hang (no token for upstream.stream_stall_seconds)",
      "qwen2.5-7b",
      { kind: "hang" },
      { upstream: { stream_stall_seconds: 0.3 } },
    ],
  ];
}

/** Sets the fault on `engine`: a cut at once; die and hang midway (the returned step, after 4 text deltas). */
export function armFault(
  engine: { setFault(fault: SimFault): void },
  fault: SimFault,
): { after: number; run: () => void } | undefined {
  if (fault.kind === "cut_stream") {
    engine.setFault(fault);
    return undefined;
  }
  return { after: 4, run: () => engine.setFault(fault) };
}

/** The answer says it was continued once, from `first`, by another engine, and the metric counted it. */
export async function expectContinuedOnce(
  cluster: Cluster,
  meta: Record<string, unknown> | undefined,
  first: string,
  fault: SimFault,
): Promise<void> {
  const migrated = meta?.["migrated"] as { from: string[]; tool_call: string; cause: string };
  expect(migrated.from).toEqual([first]);
  expect(migrated.tool_call).toBe("none");
  expect(migrated.cause).toContain(fault.kind === "hang" ? "stalled mid-answer" : "mid-answer");
  expect(meta?.["backend_id"]).not.toBe(first);
  const metrics = await scrape(cluster.url);
  expect(metricValue(metrics, "agentserve_migrations_total", { outcome: "continued" })).toBe(1);
}
