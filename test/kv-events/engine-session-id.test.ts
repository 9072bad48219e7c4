// The gateway tells engines the session it placed a request as (X-Session-ID), so an engine's BlockStored events
// carry it and the gateway's index learns the session's blocks: a real simulated engine, real ZMQ, real HTTP.
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load.js";
import { withEngineSessionHeader } from "../../src/gateway/engine-session-header.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { startSimEngine } from "../../src/sim/index.js";
import { parseKvEventsConfig } from "../../src/sim/kv-events-config.js";

const MODEL = "sim-kv";
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function gatewayWithOneEngine(): Promise<Gateway> {
  const events = parseKvEventsConfig(
    JSON.stringify({ enable_kv_cache_events: true, endpoint: "tcp://127.0.0.1:0", topic: "kv" }),
  );
  const engine = await startSimEngine({ profile: "instant", model: MODEL, kvEvents: { config: events! } });
  cleanups.push(() => engine.close());
  const config = parseConfig(
    {
      server: { host: "127.0.0.1", port: 0 },
      backends: [
        {
          id: "e1",
          tier: "default",
          base_url: engine.url,
          model: MODEL,
          kv_events: { endpoint: engine.kvEvents!.endpoint, topic: "kv" },
        },
      ],
    },
    "test",
  );
  const gateway = await Gateway.start(config, {
    logger: pino({ level: "silent" }),
    listen: { host: "127.0.0.1", port: 0 },
  });
  cleanups.push(() => gateway.close(0));
  return gateway;
}

async function send(gateway: Gateway, headers: Record<string, string>, text: string) {
  const response = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: text }], max_tokens: 2 }),
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { x_agent_serve: { session_id: string | null } }).x_agent_serve;
}

describe("the session id on the engine's KV events", () => {
  it("reaches the engine as X-Session-ID, whatever header the client named it with", async () => {
    const gateway = await gatewayWithOneEngine();
    const view = gateway.runtime.kvCache!;
    // Claude Code's own header: the gateway's session key (split by thread) is what it forwards.
    const receipt = await send(gateway, { "x-claude-code-session-id": "cc-7" }, "Read src/a.ts. ".repeat(40));
    const session = receipt.session_id!;
    expect(session).toContain("cc-7");
    // The engine's events name the session: the index holds its chain (waited for by applied batches).
    while ((view.held("e1", undefined, session)?.tokens ?? 0) === 0) await view.nextApplied();
    expect(view.held("e1", undefined, session)!.tokens).toBeGreaterThanOrEqual(144);
    expect(view.held("e1", undefined, "another-session")!.tokens).toBe(0);
  });

  it("adds the header only for a request placed as a session", () => {
    const base = { "content-type": "application/json" };
    expect(withEngineSessionHeader(base, "s-1")).toEqual({ ...base, "x-session-id": "s-1" });
    expect(withEngineSessionHeader(base, undefined)).toEqual(base);
    expect(base).toEqual({ "content-type": "application/json" });
  });
});
