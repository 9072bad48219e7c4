// Under `auto`, a bound session keeps its tier as its prompt grows; a new session, a hint or a model still choose.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  answerOk,
  post,
  startGatewayFor,
  startScriptedEngine,
  type ScriptedEngine,
  type TestGateway,
} from "../helpers/faulty-engine.js";

interface Meta {
  tier: string;
  tier_source: string;
  backend_id: string;
  reason: string;
}

const SHORT = "a short question";
const LONG = "x".repeat(300); // over the threshold of 100 characters below

describe("tier stickiness", () => {
  const engines: ScriptedEngine[] = [];
  const gateways: TestGateway[] = [];
  let sticky: TestGateway;
  let loose: TestGateway;
  beforeAll(async () => {
    for (let i = 0; i < 2; i++)
      engines.push(await startScriptedEngine({ completion: ({ res }) => answerOk(res) }));
    const backends = [
      { id: "small-0", tier: "small", url: engines[0]!.url, model: "small-m" },
      { id: "big-0", tier: "big", url: engines[1]!.url, model: "big-m" },
    ];
    sticky = await startGatewayFor(backends, { routing: { prompt_length_threshold: 100 } });
    loose = await startGatewayFor(backends, {
      routing: { prompt_length_threshold: 100, session_stays_same_tier: false },
    });
    gateways.push(sticky, loose);
  });
  afterAll(async () => {
    for (const gw of gateways) await gw.close();
    for (const engine of engines) await engine.close();
  });

  async function turn(
    gw: TestGateway,
    session: string,
    content: string,
    headers: Record<string, string> = {},
    model?: string,
  ): Promise<Meta> {
    const body: Record<string, unknown> = { messages: [{ role: "user", content }] };
    if (model !== undefined) body["model"] = model;
    const answer = await post(gw.url, body, { "x-session-id": session, ...headers });
    expect(answer.status).toBe(200);
    return (JSON.parse(answer.text) as { x_agent_serve: Meta }).x_agent_serve;
  }

  it("a session keeps its tier under auto when its prompt crosses the threshold", async () => {
    expect(sticky.config.routing.session_stays_same_tier).toBe(true);
    const first = await turn(sticky, "grow", SHORT, { "x-tier-hint": "auto" });
    expect(first).toMatchObject({ tier: "small", tier_source: "auto_default", backend_id: "small-0" });
    const grown = await turn(sticky, "grow", LONG, { "x-tier-hint": "auto" });
    expect(grown).toMatchObject({ tier: "small", tier_source: "auto_session", backend_id: "small-0" });
    expect(grown.reason).not.toBe("rebind_tier_changed");
    // Without a hint and without a model the rules decide too: still the session's tier.
    expect(await turn(sticky, "grow", LONG)).toMatchObject({ tier: "small", tier_source: "auto_session" });
  });

  it("the rules still pick a new session's tier", async () => {
    expect(await turn(sticky, "new-long", LONG, { "x-tier-hint": "auto" })).toMatchObject({
      tier: "big",
      tier_source: "auto_long_prompt",
      backend_id: "big-0",
    });
  });

  it("an explicit hint or model still moves a bound session", async () => {
    await turn(sticky, "moved", SHORT, { "x-tier-hint": "auto" });
    const hinted = await turn(sticky, "moved", SHORT, { "x-tier-hint": "big" });
    expect(hinted).toMatchObject({ tier: "big", tier_source: "hint", reason: "rebind_tier_changed" });
    // Bound to big now: auto keeps it there, even for a short prompt.
    expect(await turn(sticky, "moved", SHORT, { "x-tier-hint": "auto" })).toMatchObject({
      tier: "big",
      tier_source: "auto_session",
    });
    const modelled = await turn(sticky, "moved", SHORT, {}, "small-m");
    expect(modelled).toMatchObject({ tier: "small", tier_source: "model", reason: "rebind_tier_changed" });
  });

  it("routing.session_stays_same_tier false restores the per-request rules", async () => {
    await turn(loose, "bounce", SHORT, { "x-tier-hint": "auto" });
    expect(await turn(loose, "bounce", LONG, { "x-tier-hint": "auto" })).toMatchObject({
      tier: "big",
      tier_source: "auto_long_prompt",
      reason: "rebind_tier_changed",
    });
  });
});
