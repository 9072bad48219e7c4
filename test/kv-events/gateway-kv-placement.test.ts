// The gateway places by what simulated engines' KV events say they hold, and every receipt carries the
// prediction beside the engine's own cached_tokens: real engines, real ZMQ, real HTTP on loopback.
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { promptBlocksOf, simulatedPromptTokens } from "../../src/kv-events/prompt-blocks.js";
import { metricValue, scrapeMetrics } from "../../src/metrics/prometheus-text.js";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";
import { loopbackKvEvents } from "./loopback-kv-events.js";

const MODEL = "sim-kv";
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function engine(): Promise<SimEngineHandle> {
  const config = loopbackKvEvents();
  const handle = await startSimEngine({
    profile: "instant",
    model: MODEL,
    kvCapacityBlocks: 4096,
    kvEvents: { config },
  });
  cleanups.push(() => handle.close());
  return handle;
}

async function cluster(ids: string[]) {
  const engines = new Map<string, SimEngineHandle>();
  for (const id of ids) engines.set(id, await engine());
  const config = parseConfig(
    {
      server: { host: "127.0.0.1", port: 0 },
      affinity: { kv_events: { move_min_tokens: 64 } },
      backends: ids.map((id) => {
        const handle = engines.get(id)!;
        return {
          id,
          tier: "default",
          base_url: handle.url,
          model: MODEL,
          kv_events: {
            endpoint: handle.kvEvents!.endpoint,
            replay_endpoint: handle.kvEvents!.replayEndpoint,
            topic: "kv-events",
          },
        };
      }),
    },
    "test",
  );
  const gateway = await Gateway.start(config, {
    logger: pino({ level: "silent" }),
    listen: { host: "127.0.0.1", port: 0 },
  });
  cleanups.push(() => gateway.close(0));
  return { gateway, engines };
}

type Message = { role: string; content: string };

async function chat(url: string, messages: Message[], session?: string) {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(session === undefined ? {} : { "x-session-id": session }),
    },
    body: JSON.stringify({ model: MODEL, messages, max_tokens: 4, ignore_eos: true }),
  });
  expect(response.status).toBe(200);
  return (await response.json()) as {
    choices: { message: { content: string } }[];
    usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };
    x_agent_serve: Record<string, unknown>;
  };
}

/** Waits, by applied batches (and new ones the engine is made to publish), until the gateway's view agrees. */
async function until(gateway: Gateway, poke: SimEngineHandle, condition: () => boolean): Promise<void> {
  const view = gateway.runtime.kvCache!;
  for (let round = 0; !condition(); round++) {
    if (round > 200) throw new Error("the gateway's view never caught up");
    const applied = view.nextApplied();
    // A batch of its own on the poked engine: if the subscriber missed earlier ones, the gap is replayed.
    await chat(poke.url, [{ role: "user", content: `filler ${round} `.repeat(12) }]);
    await applied;
  }
}

function heldOn(gateway: Gateway, backendId: string, messages: Message[]): number {
  const prompt = simulatedPromptTokens("chat", { model: MODEL, messages });
  return (
    gateway.runtime.kvCache!.held(backendId, promptBlocksOf(prompt!.tokens, 16, undefined), undefined)
      ?.tokens ?? 0
  );
}

const SYSTEM = {
  role: "system",
  content: "You are a coding agent working in a large repository. ".repeat(30),
};

describe("placement by KV events", () => {
  it("sends a request without a session where the longest prefix is, and predicts the engine's cached tokens", async () => {
    const { gateway, engines } = await cluster(["e1", "e2", "e3"]);
    const e2 = engines.get("e2")!;
    const first: Message[] = [SYSTEM, { role: "user", content: "List the files under src/ please." }];
    await chat(e2.url, first); // e2 alone holds the prefix
    await until(gateway, e2, () => heldOn(gateway, "e2", first) > 0);

    const next: Message[] = [SYSTEM, { role: "user", content: "List the files under test/ instead." }];
    const answer = await chat(gateway.url, next);
    expect(answer.x_agent_serve["backend_id"]).toBe("e2");
    expect(answer.x_agent_serve["reason"]).toBe("kv_prefix");
    const cached = answer.usage.prompt_tokens_details.cached_tokens;
    expect(cached).toBeGreaterThan(300);
    expect(answer.x_agent_serve["expected_cached_tokens"]).toBe(cached);
    expect(answer.x_agent_serve["cached_tokens"]).toBe(cached);

    const metrics = await scrapeMetrics(gateway.url);
    expect(metricValue(metrics, "agentserve_kv_prediction_error_ratio_count", { tier: "default" })).toBe(1);
    expect(
      metricValue(metrics, "agentserve_kv_prediction_error_ratio_bucket", { tier: "default", le: "0" }),
    ).toBe(1);
  });

  it("moves a session whose engine evicted it to the engine holding it, and keeps it there", async () => {
    const { gateway, engines } = await cluster(["e1", "e2"]);
    const turn1: Message[] = [SYSTEM, { role: "user", content: "Read src/index.ts and summarise it." }];
    const one = await chat(gateway.url, turn1, "agent-1");
    const home = one.x_agent_serve["backend_id"] as string;
    const other = home === "e1" ? "e2" : "e1";
    const turn2: Message[] = [
      ...turn1,
      { role: "assistant", content: one.choices[0]!.message.content },
      { role: "user", content: "Now the tests." },
    ];
    // The other engine comes to hold the conversation, and the home loses everything.
    await chat(engines.get(other)!.url, turn2);
    const reset = await fetch(`${engines.get(home)!.url}/reset_prefix_cache`, { method: "POST" });
    expect(reset.status).toBe(200);
    await until(
      gateway,
      engines.get(other)!,
      () => heldOn(gateway, home, turn2) === 0 && heldOn(gateway, other, turn2) > 0,
    );

    const two = await chat(gateway.url, turn2, "agent-1");
    expect(two.x_agent_serve["backend_id"]).toBe(other);
    expect(two.x_agent_serve["reason"]).toBe("kv_moved");
    expect(two.x_agent_serve["expected_cached_tokens"]).toBe(two.usage.prompt_tokens_details.cached_tokens);

    const turn3: Message[] = [
      ...turn2,
      { role: "assistant", content: two.choices[0]!.message.content },
      { role: "user", content: "Thanks." },
    ];
    const three = await chat(gateway.url, turn3, "agent-1");
    expect(three.x_agent_serve["backend_id"]).toBe(other);
    expect(three.x_agent_serve["reason"]).toBe("affinity_hit");
  });

  it("keeps today's placement and omits the prediction for engines without events", async () => {
    const plain = await startSimEngine({ profile: "instant", model: MODEL });
    cleanups.push(() => plain.close());
    const config = parseConfig(
      {
        server: { host: "127.0.0.1", port: 0 },
        backends: [{ id: "p1", tier: "default", base_url: plain.url, model: MODEL }],
      },
      "test",
    );
    const gateway = await Gateway.start(config, {
      logger: pino({ level: "silent" }),
      listen: { host: "127.0.0.1", port: 0 },
    });
    cleanups.push(() => gateway.close(0));
    const answer = await chat(gateway.url, [SYSTEM, { role: "user", content: "hi" }], "s-plain");
    expect(answer.x_agent_serve["reason"]).toBe("new_session");
    expect("expected_cached_tokens" in answer.x_agent_serve).toBe(false);
  });
});
