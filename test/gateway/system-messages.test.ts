// Claude Code's mid-conversation system message and billing header through the gateway, to an engine that refuses
// system messages as vLLM before 0.24 does: folded by default (the engine sees the user turn with the system text,
// the top-level system unchanged but for the billing header), every later turn cached; with the adaptation off the
// engine's 400 reaches the client.
import { afterEach, describe, expect, it } from "vitest";
import { startSimEngine } from "../../src/sim/index.js";
import type { Exchange } from "../clients/tap.js";
import { startTappedGateway } from "../helpers/tapped-gateway.js";

const MODEL = "sim-small";
const SYSTEM = [
  { type: "text", text: "x-anthropic-billing-header: cc_version=2.1.332.d60; cc_entrypoint=sdk-cli;" },
  { type: "text", text: "You are Claude Code. ".repeat(40) },
];
const ENV = { role: "system", content: [{ type: "text", text: "# Environment\n - cwd: /work" }] };

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

async function startRig(adaptation?: Record<string, boolean>): Promise<{ url: string; log: Exchange[] }> {
  const log: Exchange[] = [];
  const engine = await startSimEngine({
    profile: "instant",
    model: MODEL,
    seed: 3,
    systemMessages: "refuse",
  });
  const gateway = await startTappedGateway(engine, MODEL, log, adaptation);
  close = () => gateway.close();
  return { url: gateway.url, log };
}

function turn(url: string, messages: unknown[]): Promise<globalThis.Response> {
  return fetch(`${url}/v1/messages`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-claude-code-session-id": "5b0e1f8e-1b6c-4c1e-9d59-0c2f7a0e4b11",
    },
    body: JSON.stringify({ model: MODEL, max_tokens: 16, system: SYSTEM, messages }),
  });
}

describe("Claude Code's system text through the gateway", () => {
  it("is folded and the billing header dropped, so a refusing engine answers and the next turn is cached", async () => {
    const { url, log } = await startRig();
    const first = [{ role: "user", content: "Write hello.txt" }, ENV];
    const one = await turn(url, first);
    expect(one.status).toBe(200);
    const answer = (await one.json()) as {
      content: { text?: string }[];
      x_agent_serve: { adapted: string[] };
    };
    expect(answer.x_agent_serve.adapted).toEqual(["drop_billing_header", "fold_system_messages:1"]);
    const exchange = log.find((e) => e.path.startsWith("/v1/messages"))!;
    const sent = JSON.parse(exchange.requestBody) as { system: unknown[]; messages: unknown[] };
    expect(sent.system).toEqual([SYSTEM[1]]);
    expect(sent.messages).toEqual([
      { role: "user", content: "Write hello.txt\n\n# Environment\n - cwd: /work" },
    ]);
    const text = answer.content.map((block) => block.text ?? "").join("");
    const two = await turn(url, [
      ...first,
      { role: "assistant", content: text },
      { role: "user", content: "Go on." },
    ]);
    expect(two.status).toBe(200);
    const usage = ((await two.json()) as { usage: Record<string, number> }).usage;
    const prompt = usage["input_tokens"]! + usage["cache_read_input_tokens"]!;
    expect(usage["cache_read_input_tokens"]! / prompt).toBeGreaterThan(0.9);
  });

  it("reaches the engine unchanged with the adaptation off, and its 400 reaches the client", async () => {
    const { url } = await startRig({ fold_system_messages: false, drop_billing_header: false });
    const refused = await turn(url, [{ role: "user", content: "Write hello.txt" }, ENV]);
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain("messages[1]");
  });
});
