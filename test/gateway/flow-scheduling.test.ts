// The flow scheduler over real HTTP: who a full engine serves next (policy, X-Priority bands), per-agent caps.
import { afterEach, describe, expect, it } from "vitest";
import { metricValue, scrape } from "../helpers/cluster.js";
import {
  answerOk,
  post,
  startGatewayFor,
  startScriptedEngine,
  type CompletionCall,
  type ScriptedEngine,
  type TestGateway,
} from "../helpers/faulty-engine.js";

/** An engine that holds every request until told to answer, and records whose request reached it, in order. */
async function holdingEngine(): Promise<{ engine: ScriptedEngine; held: CompletionCall[]; order: string[] }> {
  const held: CompletionCall[] = [];
  const order: string[] = [];
  const engine = await startScriptedEngine({
    completion: (call) => {
      const body = JSON.parse(call.body.toString()) as { messages: { content: string }[] };
      order.push(body.messages[0]!.content);
      held.push(call);
    },
  });
  return { engine, held, order };
}

function send(url: string, label: string, headers: Record<string, string>): Promise<{ status: number }> {
  return post(url, { model: "m", messages: [{ role: "user", content: label }], max_tokens: 4 }, headers);
}

async function queued(url: string, depth: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (metricValue(await scrape(url), "agentserve_queue_depth") === depth) return;
  }
  throw new Error(`queue never reached ${depth}`);
}

describe("flow scheduling through the gateway", () => {
  let gateway: TestGateway | undefined;
  let engine: ScriptedEngine | undefined;
  afterEach(async () => {
    await gateway?.close();
    await engine?.close();
    gateway = engine = undefined;
  });

  /** One engine of one slot, busy with a batch agent's call; the batch agent queues 3 more, then `last` asks. */
  async function burstThenOne(
    scheduling: Record<string, unknown>,
    lastHeaders: Record<string, string>,
  ): Promise<string[]> {
    const rig = await holdingEngine();
    engine = rig.engine;
    gateway = await startGatewayFor([{ id: "e0", url: engine.url, maxInflight: 1 }], {
      admission: { scheduling },
    });
    const url = gateway.url;
    const batch = { "x-agent-id": "batch" };
    const answers: Promise<{ status: number }>[] = [];
    const arrived = engine.after("completion");
    answers.push(send(url, "batch-0", batch));
    await arrived;
    for (let i = 1; i <= 3; i++) answers.push(send(url, `batch-${i}`, batch));
    await queued(url, 3);
    answers.push(send(url, "interactive", { "x-agent-id": "interactive", ...lastHeaders }));
    await queued(url, 4);
    for (let served = 1; served <= 4; served++) {
      const next = engine.after("completion");
      answerOk(rig.held[served - 1]!.res);
      await next;
    }
    answerOk(rig.held[4]!.res);
    expect((await Promise.all(answers)).map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    return rig.order;
  }

  it("fifo serves the burst before the agent that asked last", async () => {
    const order = await burstThenOne({ policy: "fifo" }, {});
    expect(order).toEqual(["batch-0", "batch-1", "batch-2", "batch-3", "interactive"]);
  });

  it("least-attained (the default) serves the agent with the least service first", async () => {
    const order = await burstThenOne({}, {});
    expect(order).toEqual(["batch-0", "interactive", "batch-1", "batch-2", "batch-3"]);
  });

  it("X-Priority puts a request in a higher band, served first whatever the policy; clamped to what is allowed", async () => {
    const order = await burstThenOne({ policy: "fifo", max_header_priority: 2 }, { "x-priority": "9" });
    expect(order).toEqual(["batch-0", "interactive", "batch-1", "batch-2", "batch-3"]);
    const waited = metricValue(await scrape(gateway!.url), 'agentserve_queue_wait_seconds_count{band="2"}');
    expect(waited).toBe(1);
  });

  it("without leave, X-Priority cannot rise above the default band; a bad value is a 400", async () => {
    const order = await burstThenOne({ policy: "fifo" }, { "x-priority": "2" });
    expect(order.at(-1)).toBe("interactive");
    const bad = await send(gateway!.url, "bad", { "x-priority": "high" });
    expect(bad.status).toBe(400);
  });

  it("holds an agent to max_inflight_per_agent while another agent takes the free slot", async () => {
    const rig = await holdingEngine();
    engine = rig.engine;
    gateway = await startGatewayFor([{ id: "e0", url: engine.url, maxInflight: 3 }], {
      admission: { max_inflight_per_agent: 1 },
    });
    const url = gateway.url;
    const first = engine.after("completion");
    const a0 = send(url, "a-0", { "x-agent-id": "a" });
    await first;
    const a1 = send(url, "a-1", { "x-agent-id": "a" });
    await queued(url, 1);
    const second = engine.after("completion");
    const b0 = send(url, "b-0", { "x-agent-id": "b" });
    await second;
    expect(rig.order).toEqual(["a-0", "b-0"]);
    const third = engine.after("completion");
    answerOk(rig.held[0]!.res);
    await third;
    expect(rig.order).toEqual(["a-0", "b-0", "a-1"]);
    answerOk(rig.held[1]!.res);
    answerOk(rig.held[2]!.res);
    expect((await Promise.all([a0, a1, b0])).map((r) => r.status)).toEqual([200, 200, 200]);
    const text = await scrape(url);
    expect(metricValue(text, 'agentserve_flow_served_tokens_total{flow="a"}')).toBe(14);
    expect(metricValue(text, "agentserve_flow_fairness_index")).toBeGreaterThan(0.5);
  });

  it("a request held by its agent's cap does not make its engine look full: a turn bound there still goes there", async () => {
    const rigs = [await holdingEngine(), await holdingEngine()];
    engine = rigs[0]!.engine;
    try {
      gateway = await startGatewayFor(
        rigs.map((rig, i) => ({ id: `e${i}`, url: rig.engine.url, maxInflight: 3 })),
        { admission: { max_inflight_per_agent: 1 } },
      );
      const url = gateway.url;
      const session = { "x-session-id": "s" };
      // The session's first turn binds it to its home engine.
      const firstTurn = post(url, { model: "m", messages: [{ role: "user", content: "s-1" }] }, session);
      await Promise.race(rigs.map((rig) => rig.engine.after("completion")));
      const home = rigs.findIndex((rig) => rig.held.length === 1);
      const rig = rigs[home]!;
      answerOk(rig.held[0]!.res);
      expect((await firstTurn).headers.get("x-agent-serve-backend")).toBe(`e${home}`);
      // Agent a works in the same session: its first call runs at home, its second waits for its cap.
      const agent = { ...session, "x-agent-id": "a" };
      const started = rig.engine.after("completion");
      const a0 = send(url, "a-0", agent);
      await started;
      const a1 = send(url, "a-1", agent);
      await queued(url, 1);
      // The session's next turn (no agent: not capped) finds a free slot at home and starts there at once.
      const turnArrived = Promise.race(rigs.map((r, i) => r.engine.after("completion").then(() => i)));
      const turn = post(url, { model: "m", messages: [{ role: "user", content: "s-2" }] }, session);
      expect(await turnArrived, "the turn spilled to the other engine").toBe(home);
      expect(rig.order).toEqual(["s-1", "a-0", "s-2"]);
      answerOk(rig.held[2]!.res);
      const answered = await turn;
      expect(answered.headers.get("x-agent-serve-backend")).toBe(`e${home}`);
      expect(answered.headers.get("x-agent-serve-reason")).toBe("affinity_hit");
      // a-1 starts when a-0 frees the agent's slot.
      const resumed = rig.engine.after("completion");
      answerOk(rig.held[1]!.res);
      await resumed;
      answerOk(rig.held[3]!.res);
      expect((await Promise.all([a0, a1])).map((r) => r.status)).toEqual([200, 200]);
      expect(rig.order).toEqual(["s-1", "a-0", "s-2", "a-1"]);
    } finally {
      await rigs[1]!.engine.close();
    }
  });
});
