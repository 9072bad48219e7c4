// A request's flow and band: agent, else session; configured band; X-Priority clamped to what is allowed.
import { describe, expect, it } from "vitest";
import {
  flowTicket,
  serviceTokens,
  type FlowIdentity,
} from "../../../src/admission/flow-queue/flow-ticket.js";
import { parseConfig } from "../../../src/config/load.js";
import { jainIndex } from "../../../src/metrics/jain-index.js";

function admission(scheduling: Record<string, unknown> = {}) {
  return parseConfig(
    {
      backends: [{ id: "e", tier: "t", base_url: "http://127.0.0.1:1", model: "m" }],
      admission: { scheduling },
    },
    "test",
  ).admission;
}

const who = (over: Partial<FlowIdentity>): FlowIdentity => ({
  agentId: undefined,
  sessionId: undefined,
  priority: undefined,
  keyMaxPriority: undefined,
  estimatedTokens: 100,
  ...over,
});

describe("flowTicket", () => {
  it("names the flow by agent, else session, else the anonymous flow; only agents are capped", () => {
    const a = admission();
    expect(flowTicket(a, who({ agentId: "x", sessionId: "s" }))).toMatchObject({
      flow: "x",
      capped: true,
      band: 1,
    });
    expect(flowTicket(a, who({ sessionId: "s" }))).toMatchObject({ flow: "session:s", capped: false });
    expect(flowTicket(a, who({}))).toMatchObject({ flow: "(anonymous)", capped: false });
  });

  it("takes the agent's band and weight from config", () => {
    const a = admission({ agents: { batch: { band: 0, weight: 4 } } });
    expect(flowTicket(a, who({ agentId: "batch" }))).toMatchObject({ band: 0, weight: 4 });
  });

  it("clamps X-Priority to [0, the key's or config's maximum]; a client may always go lower", () => {
    const a = admission({ bands: 4, max_header_priority: 2 });
    expect(flowTicket(a, who({ priority: 9 })).band).toBe(2);
    expect(flowTicket(a, who({ priority: 9, keyMaxPriority: 3 })).band).toBe(3);
    expect(flowTicket(a, who({ priority: -5 })).band).toBe(0);
    expect(flowTicket(admission(), who({ priority: 2 })).band).toBe(1);
  });

  it("refuses a config naming a band that does not exist, by path", () => {
    expect(() => admission({ bands: 2, default_band: 2 })).toThrow(/admission\.scheduling\.default_band/);
  });
});

describe("serviceTokens and jainIndex", () => {
  it("counts computed prompt tokens plus generated ones", () => {
    expect(serviceTokens({ promptTokens: 1000, cachedTokens: 900, completionTokens: 50 })).toBe(150);
    expect(serviceTokens(undefined)).toBe(0);
  });

  it("is 1 for equal shares and 1/n when one flow has everything", () => {
    expect(jainIndex([5, 5, 5])).toBe(1);
    expect(jainIndex([9, 0, 0])).toBeCloseTo(1 / 3, 9);
    expect(jainIndex([])).toBe(1);
  });
});
