// Three gateway replicas over a real redis-server: sessions keep their engine across replicas, outages and restarts.
// The scenario runs on real gateway processes; the tests that flush a replica's write-backs run them in-process.
import { afterEach, describe, expect, it } from "vitest";
import { chat, metaOf, metricValue, scrape } from "../helpers/cluster.js";
import { useRedisServer } from "../helpers/redis-server.js";
import {
  startReplicaProcesses,
  startReplicas,
  type ReplicaFleet,
  type Replicas,
} from "../helpers/replicas.js";

const redis = useRedisServer();
let fleet: Replicas | undefined;
let prefixCounter = 0;

afterEach(async () => {
  await fleet?.close();
  fleet = undefined;
});

const ENGINES = ["e-0", "e-1", "e-2", "e-3"];

function overrides(store: "memory" | "redis"): Record<string, unknown> {
  return {
    affinity: {
      store:
        store === "memory"
          ? { kind: "memory" }
          : { kind: "redis", url: redis.server.url, timeout_ms: 200, key_prefix: `it${prefixCounter++}:` },
    },
    health: { probe_interval_seconds: 0.1, probe_timeout_seconds: 0.2, failures_to_mark_down: 3 },
  };
}

/** One turn of a session on the given replica; the engine that served it. */
async function turn(f: Replicas, replica: number, session: string): Promise<string> {
  const response = await chat(f.url(replica), {
    session,
    maxTokens: 4,
    messages: [{ role: "user", content: `turn of ${session}` }],
  });
  expect(response.status).toBe(200);
  return metaOf(response.json).backend_id;
}

interface Tally {
  turns: number;
  samePrevious: number;
  forced: number;
}

/**
 * The scenario: 30 sessions, each turn on the next replica (as a Service spreads connections);
 * two transient 503s, an engine outage and its recovery, one replica restarted. Counts the turns served by
 * the engine of the session's previous turn, and the forced moves (the turn hit a 503, or its engine was down).
 */
async function scenario(f: Replicas): Promise<Tally & { brokenBeforeRestart: number; heldByDead: number }> {
  const sessions = Array.from({ length: 30 }, (_, i) => `agent-session-${i}`);
  const engineOf = new Map<string, string>();
  const tally: Tally = { turns: 0, samePrevious: 0, forced: 0 };
  let next = 0;
  const round = async (forcedFor: (session: string) => boolean = () => false) => {
    for (const session of sessions) {
      const engine = await turn(f, next++ % f.size, session);
      const previous = engineOf.get(session);
      if (previous !== undefined) {
        tally.turns++;
        if (engine === previous) tally.samePrevious++;
        else if (forcedFor(session)) tally.forced++;
      }
      engineOf.set(session, engine);
    }
  };
  await round();
  await round();

  // Two requests meet a transient 503 on one engine (one per replica), then the engine is fine again.
  const flaky = engineOf.get(sessions[0]!)!;
  const onFlaky = sessions.filter((s) => engineOf.get(s) === flaky).slice(0, 2);
  expect(onFlaky.length).toBe(2);
  f.engines.get(flaky)!.setFault({ kind: "error_rate", rate: 1, status: 503 });
  for (const [i, session] of onFlaky.entries()) {
    const engine = await turn(f, i, session);
    expect(engine).not.toBe(flaky);
    tally.turns++;
    tally.forced++;
    engineOf.set(session, engine);
  }
  f.engines.get(flaky)!.setFault({ kind: "none" });
  await round();
  await round();

  // An engine goes down (every replica's probes see it), sessions move, it comes back.
  const dead = ENGINES.find((e) => e !== flaky && [...engineOf.values()].includes(e))!;
  const heldByDead = sessions.filter((s) => engineOf.get(s) === dead);
  f.engines.get(dead)!.setFault({ kind: "hang" });
  await f.allSee(dead, "down");
  await round((s) => heldByDead.includes(s));
  f.engines.get(dead)!.setFault({ kind: "none" });
  await f.allSee(dead, "up");
  await round();
  await round();
  const brokenBeforeRestart = await f.sum("agentserve_affinity_broken_total", { tier: "small" });

  // One replica restarts (a rolling deploy): a fresh process with an empty table.
  await f.restart(1);
  await round();
  await round();
  return { ...tally, brokenBeforeRestart, heldByDead: heldByDead.length };
}

describe.skipIf(redis.skip)("replicas sharing bindings in redis", () => {
  it("keeps every turn on the session's previous engine except forced moves, and counts broken once", async () => {
    const f = await startReplicaProcesses(ENGINES, 3, overrides("redis"));
    fleet = f;
    const result = await scenario(f);
    expect(result.turns).toBe(30 * 8 + 2); // eight rounds after the first, and the two 503 turns
    expect(result.samePrevious + result.forced).toBe(result.turns);
    expect(result.forced).toBe(2 + result.heldByDead);
    // Two failed requests broke two bindings; the outage broke exactly the bindings the dead engine held.
    expect(result.brokenBeforeRestart).toBe(2 + result.heldByDead);
    for (let replica = 0; replica < f.size; replica++) {
      const text = await scrape(f.url(replica));
      expect(metricValue(text, "agentserve_binding_store_up")).toBe(1);
    }
  }, 60_000);

  it("control: with the memory store the same scenario scatters sessions", async () => {
    fleet = await startReplicaProcesses(ENGINES, 3, overrides("memory"));
    const result = await scenario(fleet);
    expect(result.samePrevious + result.forced).toBeLessThan(result.turns);
  }, 60_000);

  it("a replica starting with the redis store listens once the store answers: its first turn follows the shared binding", async () => {
    const f: ReplicaFleet = await startReplicas(ENGINES, 2, overrides("redis"));
    fleet = f;
    // A binding that is not the session's rendezvous winner: its engine fails one request and it moves.
    const session = "restarted-replica-0";
    const winner = await turn(f, 0, session);
    f.engines.get(winner)!.setFault({ kind: "error_rate", rate: 1, status: 503 });
    const moved = await turn(f, 0, session);
    f.engines.get(winner)!.setFault({ kind: "none" });
    expect(moved).not.toBe(winner);
    // A fresh replica (a rolling restart) takes the session's next turn as soon as it is started.
    await f.restart(1);
    expect(await turn(f, 1, session)).toBe(moved);
    expect(metricValue(await scrape(f.url(1)), "agentserve_binding_store_errors_total")).toBe(0);
  }, 30_000);

  it("a replica starting with a redis budget store admits on the shared budget from its first request", async () => {
    const budgetStore = {
      kind: "redis",
      url: redis.server.url,
      timeout_ms: 200,
      key_prefix: `start${prefixCounter++}:`,
    };
    // Bindings in memory: only the budget store's connection decides when the fresh replica may listen.
    const f: ReplicaFleet = await startReplicas(ENGINES, 2, {
      ...overrides("memory"),
      admission: { default_token_budget: 100, store: budgetStore },
    });
    fleet = f;
    const ask = (replica: number) =>
      chat(f.replicas[replica]!.url, { maxTokens: 8, headers: { "x-agent-id": "spent-agent" } });
    let refused = false;
    for (let i = 0; i < 40 && !refused; i++) {
      const response = await ask(0);
      refused = response.status === 429;
      await f.replicas[0]!.runtime.budgets.flush();
    }
    expect(refused).toBe(true);
    // A fresh replica (a rolling restart) knows the agent's budget is spent from its very first request.
    await f.restart(1);
    expect((await ask(1)).status).toBe(429);
  }, 30_000);

  it("serves every request while redis-server is killed, and is consistent again soon after its restart", async () => {
    const f: ReplicaFleet = await startReplicas(ENGINES, 3, overrides("redis"));
    fleet = f;
    const sessions = Array.from({ length: 24 }, (_, i) => `kill-${i}`);
    const engineOf = new Map<string, string>();
    for (const [i, session] of sessions.entries()) engineOf.set(session, await turn(f, i % 3, session));
    // Bindings that differ from the rendezvous winner, so a replica that forgot them would show it:
    // one engine down for a moment moves its sessions elsewhere, for good.
    const moved = engineOf.get(sessions[0]!)!;
    f.engines.get(moved)!.setFault({ kind: "hang" });
    await f.allSee(moved, "down");
    for (const [i, session] of sessions.entries()) engineOf.set(session, await turn(f, (i + 1) % 3, session));
    f.engines.get(moved)!.setFault({ kind: "none" });
    await f.allSee(moved, "up");

    // Traffic goes on while redis-server is killed: every request is served.
    const traffic = (async () => {
      let served = 0;
      for (let k = 0; k < 4; k++) {
        for (const [i, session] of sessions.entries()) {
          await turn(f, (i + k) % 3, session);
          served++;
        }
      }
      return served;
    })();
    await redis.server.kill();
    expect(await traffic).toBe(4 * sessions.length);
    for (const [i, session] of sessions.entries()) await turn(f, i % 3, session);
    await redis.server.restart();
    for (const replica of f.replicas) {
      expect(await replica.runtime.bindings.connected(10_000)).toBe(true);
      await replica.runtime.bindings.flush();
    }
    // Consistent again: every replica, a fresh one too, routes each session to one engine (during the
    // outage a replica that had never seen a session placed it by rendezvous; the latest decision won).
    await f.restart(2);
    let keptEngine = 0;
    for (const session of sessions) {
      const first = await turn(f, 0, session);
      for (let replica = 1; replica < 3; replica++) expect(await turn(f, replica, session)).toBe(first);
      if (first === engineOf.get(session)) keptEngine++;
    }
    expect(keptEngine).toBeGreaterThan(0);
  }, 60_000);

  it("holds an agent's token budget across replicas (admission.store redis), not once per replica", async () => {
    const budgetStore = {
      kind: "redis",
      url: redis.server.url,
      timeout_ms: 200,
      key_prefix: `bud${prefixCounter++}:`,
    };
    const f: ReplicaFleet = await startReplicas(ENGINES, 3, {
      ...overrides("redis"),
      admission: { default_token_budget: 200, store: budgetStore },
    });
    fleet = f;
    let served = 0;
    let refused = 0;
    let tokens = 0;
    for (let i = 0; i < 60 && refused === 0; i++) {
      const response = await chat(f.replicas[i % 3]!.url, {
        session: `budget-${i}`,
        maxTokens: 8,
        headers: { "x-agent-id": "shared-agent" },
      });
      if (response.status === 200) {
        served++;
        const usage = response.json["usage"] as { total_tokens: number };
        tokens += usage.total_tokens;
        for (const replica of f.replicas) await replica.runtime.budgets.flush();
      } else {
        expect(response.status).toBe(429);
        refused++;
      }
    }
    // Refused as soon as the agent's usage over all replicas reached its one budget.
    expect(refused).toBe(1);
    expect(tokens).toBeGreaterThanOrEqual(200);
    expect(tokens - 200).toBeLessThan(tokens / served + 1);
  }, 60_000);

  it("sends the budget reservation alongside the binding lookup, not after its answer", async () => {
    const budgetStore = {
      kind: "redis",
      url: redis.server.url,
      timeout_ms: 200,
      key_prefix: `ovl${prefixCounter++}:`,
    };
    const f = await startReplicas(ENGINES, 1, { ...overrides("redis"), admission: { store: budgetStore } });
    fleet = f;
    const runtime = f.replicas[0]!.runtime;
    // Both stores are real; the wrappers only note when each call starts and ends.
    const events: string[] = [];
    const shared = runtime.bindings;
    const lookup = shared.lookup.bind(shared);
    shared.lookup = async (...args) => {
      const found = await lookup(...args);
      events.push("lookup answered");
      return found;
    };
    const budgets = runtime.budgets;
    const reserve = budgets.reserve.bind(budgets);
    budgets.reserve = (...args) => {
      events.push("reservation sent");
      return reserve(...args);
    };
    const response = await chat(f.replicas[0]!.url, {
      session: "overlap",
      headers: { "x-agent-id": "overlap-agent" },
    });
    expect(response.status).toBe(200);
    expect(events).toEqual(["reservation sent", "lookup answered"]);
  }, 60_000);
});
