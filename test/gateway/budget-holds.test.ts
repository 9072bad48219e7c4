// Budgets that hold under concurrency: in-flight requests reserve tokens, max_tokens is clamped, tables refuse.
import { TokenBudgets } from "../../src/admission/token-budgets.js";
import { afterEach, describe, expect, it } from "vitest";
import { sha256Hex } from "../../src/gateway/client-auth.js";
import {
  answerOk,
  chatAnswer,
  post,
  startGatewayFor,
  startScriptedEngine,
  type ScriptedEngine,
} from "../helpers/faulty-engine.js";

const PROMPT_TOKENS = 20;

/**
 * Answers with usage as an engine would: the prompt, and max_tokens generated (1000 when unlimited); each
 * answer once `answerWhen` resolves (called as the request arrives), so a burst can be held in flight.
 */
async function meteredEngine(
  seenMaxTokens: (number | undefined)[] = [],
  answerWhen: () => Promise<void> = () => Promise.resolve(),
): Promise<ScriptedEngine> {
  return startScriptedEngine({
    completion: ({ res, body }) => {
      const request = JSON.parse(body.toString()) as { max_tokens?: number };
      seenMaxTokens.push(request.max_tokens);
      const completion = request.max_tokens ?? 1000;
      void answerWhen().then(() =>
        answerOk(res, chatAnswer("x", { prompt_tokens: PROMPT_TOKENS, completion_tokens: completion })),
      );
    },
  });
}

const ASK = (maxTokens?: number): Record<string, unknown> => ({
  model: "m",
  messages: [{ role: "user", content: "hello there" }],
  ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }),
});

describe("budgets that hold", () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  it("a burst of 300 concurrent requests of one agent overshoots a 2,000-token budget by at most 1.5x", async () => {
    // The engine answers none of the burst until every request has either reached it or been refused by
    // the gateway: all of them are in flight together, however fast or slow this machine is.
    const BURST = 300;
    const arrived: (number | undefined)[] = [];
    let refused = 0;
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    const allThere = (): void => {
      if (arrived.length + refused === BURST) openGate();
    };
    const engine = await meteredEngine(arrived, () => {
      allThere();
      return gate;
    });
    closers.push(() => engine.close());
    const gw = await startGatewayFor([{ id: "only", url: engine.url, maxInflight: 512 }], {
      admission: { default_token_budget: 2000 },
    });
    closers.push(() => gw.close());
    const statuses = await Promise.all(
      Array.from({ length: BURST }, async () => {
        const { status } = await post(gw.url, ASK(100), { "x-agent-id": "bursty" });
        if (status !== 200) {
          refused++;
          allThere();
        }
        return status;
      }),
    );
    const budgets = gw.gateway.runtime.budgets;
    expect(budgets).toBeInstanceOf(TokenBudgets);
    const used = (budgets as TokenBudgets).used("bursty", gw.gateway.runtime.clock.nowMs());
    expect(used).toBeLessThanOrEqual(3000);
    expect(used).toBeGreaterThan(1000); // the budget was used, not refused wholesale
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThan(5);
    expect(statuses.filter((s) => s !== 200 && s !== 429)).toEqual([]);
    expect((budgets as TokenBudgets).reserved("bursty")).toBe(0); // every hold settled
  });

  it("clamps max_tokens to what the budget has left, and one without max_tokens too; 429 when nothing is left", async () => {
    const seen: (number | undefined)[] = [];
    const engine = await meteredEngine(seen);
    closers.push(() => engine.close());
    const gw = await startGatewayFor([{ id: "only", url: engine.url }], {
      admission: { default_token_budget: 2000 },
    });
    closers.push(() => gw.close());
    const big = await post(gw.url, ASK(20_000), { "x-agent-id": "greedy" });
    expect(big.status).toBe(200);
    const clock = gw.gateway.runtime.clock;
    expect(await gw.gateway.runtime.budgets.usage("greedy", clock.nowMs())).toBeLessThanOrEqual(2000);
    expect(seen[0]).toBeLessThan(2000);
    const refused = await post(gw.url, ASK(), { "x-agent-id": "greedy" });
    expect(refused.status).toBe(429);
    expect(JSON.parse(refused.text)).toMatchObject({ error: { code: "budget_exceeded" } });

    const open = await post(gw.url, ASK(), { "x-agent-id": "open-ended" });
    expect(open.status).toBe(200);
    expect(seen[1]).toBeGreaterThan(0);
    expect(await gw.gateway.runtime.budgets.usage("open-ended", clock.nowMs())).toBeLessThanOrEqual(2000);
  });

  it("a full agent table refuses newcomers instead of forgetting an agent that spent; keyed agents are never evicted", async () => {
    const engine = await meteredEngine();
    closers.push(() => engine.close());
    const gw = await startGatewayFor([{ id: "only", url: engine.url }], {
      server: {
        api_keys: [{ sha256: sha256Hex("sk-team"), agent_id: "team" }, { sha256: sha256Hex("sk-open") }],
      },
      admission: { default_token_budget: 200, max_agents: 3 },
    });
    closers.push(() => gw.close());
    const team = { authorization: "Bearer sk-team" };
    const open = (agent: string): Record<string, string> => ({
      authorization: "Bearer sk-open",
      "x-agent-id": agent,
    });
    expect((await post(gw.url, ASK(500), team)).status).toBe(200);
    expect((await post(gw.url, ASK(), team)).status).toBe(429);
    expect((await post(gw.url, ASK(500), open("spender"))).status).toBe(200);
    expect((await post(gw.url, ASK(), open("spender"))).status).toBe(429);
    // Two more unauthenticated agents fill the table (3); the next newcomer is refused, not let in by forgetting.
    expect((await post(gw.url, ASK(5), open("b"))).status).toBe(200);
    expect((await post(gw.url, ASK(5), open("c"))).status).toBe(200);
    const newcomer = await post(gw.url, ASK(5), open("d"));
    expect(newcomer.status).toBe(503);
    expect(JSON.parse(newcomer.text)).toMatchObject({ error: { code: "too_many_agents" } });
    expect(newcomer.headers.get("retry-after")).not.toBeNull();
    for (let i = 0; i < 20; i++) await post(gw.url, ASK(5), open(`flood-${i}`));
    expect((await post(gw.url, ASK(), open("spender"))).status).toBe(429);
    expect((await post(gw.url, ASK(), team)).status).toBe(429);
  });
});
