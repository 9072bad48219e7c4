// Placement end to end on simulated qwen2.5-7b engines: a hot session spills instead of piling up, uniform
// sessions stay exact, and session-less agent templates each keep to one engine's prefix cache.
import { describe, expect, it } from "vitest";
import { metricValue, scrape, startCluster, type Cluster } from "../helpers/cluster.js";
import { waitUntil } from "../helpers/wait.js";

const MODEL = "sim-7b";
/** Simulated ms per wall ms: long enough hot requests to outlast the ordinary turns, short enough tests. */
const TIME_SCALE = 4;

function engines(count: number, maxInflight: number) {
  return Array.from({ length: count }, (_, i) => ({
    id: `e${i}`,
    tier: "small",
    model: MODEL,
    maxInflight,
    sim: { profile: "qwen2.5-7b", timeScale: TIME_SCALE, seed: i },
  }));
}

interface Turn {
  status: number;
  backend: string;
  reason: string;
  affinityHit: boolean;
  queueWaitMs: number;
  /** Rank of this turn's end among all turns of the test process (1 = first answered): an order, not a time. */
  doneOrder: number;
  promptTokens: number;
  cachedTokens: number;
}

let turnsDone = 0;

/** One streamed chat completion; reads the gateway's headers and the engine's usage chunk. */
async function turn(
  url: string,
  options: { session?: string; system: string; user: string; maxTokens: number; stream?: boolean },
): Promise<Turn> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(options.session === undefined ? {} : { "x-session-id": options.session }),
    },
    body: JSON.stringify({
      model: MODEL,
      messages: [
        { role: "system", content: options.system },
        { role: "user", content: options.user },
      ],
      max_tokens: options.maxTokens,
      // The scenarios size the engines' load by reply length: exactly max_tokens (vLLM's ignore_eos).
      ignore_eos: true,
      ...(options.stream === false ? {} : { stream: true, stream_options: { include_usage: true } }),
    }),
  });
  const reader = response.body!.getReader();
  let text = "";
  const decoder = new TextDecoder();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += decoder.decode(value, { stream: true });
  }
  const usageLine = text
    .split("\n")
    .filter((line) => line.startsWith("data: {") && line.includes('"usage":{'))
    .at(-1);
  const usage =
    usageLine === undefined ? undefined : (JSON.parse(usageLine.slice(6)) as { usage: Usage }).usage;
  const h = response.headers;
  return {
    status: response.status,
    backend: h.get("x-agent-serve-backend") ?? "",
    reason: h.get("x-agent-serve-reason") ?? "",
    affinityHit: h.get("x-agent-serve-affinity-hit") === "true",
    queueWaitMs: Number(h.get("x-agent-serve-queue-wait-ms")),
    doneOrder: ++turnsDone,
    promptTokens: usage?.prompt_tokens ?? 0,
    cachedTokens: usage?.prompt_tokens_details?.cached_tokens ?? 0,
  };
}

interface Usage {
  prompt_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
}

/** Runs `jobs` with `workers` of them in flight at a time, in order. */
async function pool<T>(jobs: (() => Promise<T>)[], workers: number): Promise<T[]> {
  const results: T[] = new Array<T>(jobs.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (next < jobs.length) {
        const at = next++;
        results[at] = await jobs[at]!();
      }
    }),
  );
  return results;
}

const ORDINARY = Array.from({ length: 16 }, (_, i) => `ordinary-${i}`);
const HOT = "hot-session";
const SYSTEM = "You are a careful coding agent. Think, then act. ".repeat(10);

interface HotSpotRun {
  /** Ordinary sessions' backends after their first turn (before the fan-out). */
  homes: Map<string, string>;
  hotHome: string;
  hot: Turn[];
  ordinary: { session: string; turn: Turn }[];
  /** One more turn of each ordinary session after the fan-out ended. */
  after: Map<string, Turn>;
  spillsMetric: number;
}

/** 4 engines at max_inflight 8; 16 ordinary sessions take turns while one session fans out 12 long requests. */
async function hotSpot(loadFactor: number): Promise<HotSpotRun> {
  const cluster: Cluster = await startCluster(engines(4, 8), {
    affinity: { load_factor: loadFactor },
    admission: { max_queue_size: 256 },
  });
  try {
    const { url } = cluster;
    // Every session's first turn, one at a time: idle engines, so both runs bind every session alike.
    const homes = new Map<string, string>();
    for (const session of ORDINARY)
      homes.set(session, (await turn(url, { session, system: SYSTEM, user: "start", maxTokens: 4 })).backend);
    const hotHome = (await turn(url, { session: HOT, system: SYSTEM, user: "plan", maxTokens: 4 })).backend;

    // The fan-out: 12 concurrent long calls of one session (not streamed: the test process's CPU goes to
    // the ordinary turns), all at the gateway (in flight or queued) before the ordinary turns start.
    const hotCalls = Array.from({ length: 12 }, (_, i) =>
      turn(url, { session: HOT, system: SYSTEM, user: `tool call ${i}`, maxTokens: 600, stream: false }),
    );
    const { slots, registry } = cluster.gateway.runtime;
    const atGateway = (): number => slots.depth + [...registry.all()].reduce((n, b) => n + b.inflight, 0);
    await waitUntil("the fan-out at the gateway", () => atGateway() === 12, slots.changes.subscribe);
    const ordinary = await pool(
      [1, 2].flatMap((round) =>
        ORDINARY.map((session) => async () => ({
          session,
          turn: await turn(url, { session, system: SYSTEM, user: `turn ${round}`, maxTokens: 8 }),
        })),
      ),
      4,
    );
    const hot = await Promise.all(hotCalls);
    const after = new Map<string, Turn>();
    for (const session of ORDINARY)
      after.set(session, await turn(url, { session, system: SYSTEM, user: "after", maxTokens: 4 }));
    const spillsMetric = metricValue(await scrape(url), "agentserve_affinity_spills_total", {
      tier: "small",
    });
    return { homes, hotHome, hot, ordinary, after, spillsMetric };
  } finally {
    await cluster.close();
  }
}

describe("placement on simulated engines", () => {
  it("hot spot: the ordinary sessions stop queueing behind a fanned-out session", async () => {
    const plain = await hotSpot(0);
    const bounded = await hotSpot(1.25);
    for (const run of [plain, bounded]) {
      expect([...run.hot, ...run.ordinary.map((o) => o.turn)].every((t) => t.status === 200)).toBe(true);
    }
    // Same bindings in both runs (idle engines at every first turn), and some ordinary sessions share the hot one's engine.
    expect(bounded.homes).toEqual(plain.homes);
    expect(bounded.hotHome).toBe(plain.hotHome);
    const sharing = ORDINARY.filter((s) => plain.homes.get(s) === plain.hotHome);
    expect(sharing.length).toBeGreaterThanOrEqual(2);

    // Plain affinity: the hot session's 12 calls all go home (8 run, 4 queue), and so do the sharing sessions'.
    expect(plain.hot.every((t) => t.backend === plain.hotHome && t.reason === "affinity_hit")).toBe(true);
    const plainSharing = plain.ordinary.filter((o) => sharing.includes(o.session));
    expect(plainSharing.every((o) => o.turn.backend === plain.hotHome)).toBe(true);
    expect(plainSharing.some((o) => o.turn.queueWaitMs > 0)).toBe(true);

    // Bounded load: the 4 calls beyond the home engine's 8 slots spill; the binding stays home.
    expect(bounded.hot.filter((t) => t.reason === "spill").length).toBe(4);
    expect(bounded.hot.filter((t) => t.backend === bounded.hotHome).length).toBe(8);
    // No ordinary request queued at the gateway: the sharing sessions spilled to engines with free slots.
    expect(bounded.ordinary.filter((o) => o.turn.queueWaitMs > 0)).toEqual([]);
    for (const { session, turn: t } of bounded.ordinary) {
      if (sharing.includes(session)) expect(t).toMatchObject({ reason: "spill", affinityHit: false });
      else expect(t).toMatchObject({ reason: "affinity_hit", backend: bounded.homes.get(session) });
    }
    // Spill, never move: once the fan-out is over every session is back on its own engine, a hit.
    for (const session of ORDINARY)
      expect(bounded.after.get(session)).toMatchObject({
        backend: bounded.homes.get(session),
        reason: "affinity_hit",
      });
    const spills = [...bounded.hot, ...bounded.ordinary.map((o) => o.turn)].filter(
      (t) => t.reason === "spill",
    );
    expect(bounded.spillsMetric).toBe(spills.length);
    expect(plain.spillsMetric).toBe(0);

    // What the TTFT gain is made of, asserted on the order of events instead of a stopwatch: under plain
    // affinity a sharing session's turn that queued could only start once one of the hot session's 600-token
    // calls had ended, so it was answered after that call. (The wall-clock p99 TTFT of each policy is
    // measured by `agent-serve study hotspot`, docs/load-study.md: a ratio of two p99s measured on a shared
    // machine is a chance result, not a test.)
    const firstHotDone = Math.min(...plain.hot.map((h) => h.doneOrder));
    const queued = plainSharing.filter((o) => o.turn.queueWaitMs > 0);
    expect(queued.length).toBeGreaterThan(0);
    for (const { turn: t } of queued) expect(t.doneOrder).toBeGreaterThan(firstHotDone);
  });

  it("uniform sessions: every turn after the first is a hit on the session's one engine, nothing spills", async () => {
    const cluster = await startCluster(engines(4, 8), {});
    try {
      const sessions = Array.from({ length: 8 }, (_, i) => `uniform-${i}`);
      const before = await scrape(cluster.url);
      const turns = await Promise.all(
        sessions.map(async (session) => {
          const mine: Turn[] = [];
          for (let i = 0; i < 4; i++)
            mine.push(await turn(cluster.url, { session, system: SYSTEM, user: `turn ${i}`, maxTokens: 8 }));
          return mine;
        }),
      );
      for (const mine of turns) {
        expect(mine.map((t) => t.reason)).toEqual([
          "new_session",
          "affinity_hit",
          "affinity_hit",
          "affinity_hit",
        ]);
        expect(new Set(mine.map((t) => t.backend)).size).toBe(1);
      }
      const after = await scrape(cluster.url);
      const delta = (name: string) =>
        metricValue(after, name, { tier: "small" }) - metricValue(before, name, { tier: "small" });
      expect(delta("agentserve_affinity_hits_total")).toBe(24);
      expect(delta("agentserve_affinity_misses_total")).toBe(8);
      expect(delta("agentserve_affinity_spills_total")).toBe(0);
    } finally {
      await cluster.close();
    }
  });

  async function templates(sessionless: "prefix" | "balancer") {
    const cluster = await startCluster(engines(4, 8), { affinity: { sessionless } });
    try {
      const system = (t: number) =>
        `Template ${t}: you are agent kind #${t}. ${"Follow the house rules. ".repeat(120)}`;
      const results = new Map<number, Turn[]>();
      // Each round's six requests are in flight together: with three templates' homes on one engine (as
      // rendezvous may well hash them), that engine carries more than ceil(1.25 x the mean) while it
      // still has free slots, which a placement by the bound alone would shed to a cold engine.
      for (let round = 0; round < 12; round++) {
        // Sent in a different order each round, as independent agents would send them.
        const order = [0, 1, 2, 3, 4, 5].map((i) => (i * 5 + round) % 6);
        const answers = await Promise.all(
          order.map((t) =>
            turn(cluster.url, { system: system(t), user: `request ${round} of ${t}`, maxTokens: 4 }),
          ),
        );
        answers.forEach((answer, i) => results.set(order[i]!, [...(results.get(order[i]!) ?? []), answer]));
      }
      return results;
    } finally {
      await cluster.close();
    }
  }

  const cachedShare = (results: Map<number, Turn[]>) => {
    let prompt = 0;
    let cached = 0;
    for (const answers of results.values()) {
      for (const answer of answers.slice(1)) {
        prompt += answer.promptTokens;
        cached += answer.cachedTokens;
      }
    }
    return cached / prompt;
  };

  it("six templates without session ids: each on one engine, >= 90% of prompt tokens cached after its first request", async () => {
    const results = await templates("prefix");
    for (const answers of results.values()) {
      expect(new Set(answers.map((a) => a.backend)).size).toBe(1);
      expect(answers.every((a) => a.reason === "prefix" && !a.affinityHit)).toBe(true);
    }
    expect(cachedShare(results)).toBeGreaterThanOrEqual(0.9);

    // Control, today's placement: the balancer scatters every template, and the cache share falls below 90%.
    const scattered = await templates("balancer");
    expect([...scattered.values()].some((answers) => new Set(answers.map((a) => a.backend)).size > 1)).toBe(
      true,
    );
    expect(cachedShare(scattered)).toBeLessThan(0.9);
  });
});
