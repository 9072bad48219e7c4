// `agent-serve start` with a simulated backend whose KV events the gateway subscribes to: the engine it spawns
// publishes them where the config says, so the gateway's receipts predict the engine's cached tokens.
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load.js";
import { simArgs, simKvEventsConfig } from "../../src/cli/engine-processes.js";
import { parseKvEventsConfig } from "../../src/sim/kv-events-config.js";
import { freePorts, runCli, stopProcess, type CliProcess } from "../helpers/processes.js";
import { useTempDirs } from "../helpers/temp-dir.js";

const MODEL = "Qwen/Qwen2.5-7B-Instruct";
const tempDir = useTempDirs();
const running: CliProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((p) => stopProcess(p, "SIGKILL")));
});

function backend(kvEvents: Record<string, unknown>) {
  return parseConfig(
    {
      backends: [
        {
          id: "e1",
          tier: "default",
          base_url: "http://127.0.0.1:8101",
          model: MODEL,
          simulate: { profile: "instant" },
          kv_events: kvEvents,
        },
      ],
    },
    "test",
  ).backends[0]!;
}

describe("agent-serve start and KV events", () => {
  it("gives the simulator a --kv-events-config that binds what the gateway connects to", () => {
    const b = backend({
      endpoint: "tcp://127.0.0.1:5557",
      replay_endpoint: "tcp://127.0.0.1:5558",
      topic: "kv",
    });
    const args = simArgs(b);
    const json = args[args.indexOf("--kv-events-config") + 1]!;
    expect(json).toBe(simKvEventsConfig(b.kv_events!));
    expect(parseKvEventsConfig(json)).toMatchObject({
      endpoint: "tcp://*:5557",
      replayEndpoint: "tcp://*:5558",
      topic: "kv",
    });
    const ipc = backend({ endpoint: "ipc:///tmp/engine-kv" });
    expect(parseKvEventsConfig(simKvEventsConfig(ipc.kv_events!))).toMatchObject({
      endpoint: "ipc:///tmp/engine-kv",
      replayEndpoint: undefined,
      topic: "",
    });
    const { kv_events: _none, ...plain } = b;
    expect(simArgs(plain)).not.toContain("--kv-events-config");
  });

  it("runs an engine whose events reach the gateway: a repeated prompt's cached tokens are predicted", async () => {
    const [gatewayPort, enginePort, eventsPort, replayPort] = await freePorts(4);
    const dir = await tempDir("agent-serve-start-kv-");
    const path = join(dir, "kv.yaml");
    await writeFile(
      path,
      `server: {host: 127.0.0.1, port: ${gatewayPort}}\nbackends:\n` +
        `  - {id: e1, tier: default, base_url: "http://127.0.0.1:${enginePort}", model: ${MODEL}, ` +
        `simulate: {profile: instant}, kv_events: {endpoint: "tcp://127.0.0.1:${eventsPort}", ` +
        `replay_endpoint: "tcp://127.0.0.1:${replayPort}", topic: kv-events}}\n`,
    );
    const start = runCli(["start", "--config", path]);
    running.push(start);
    await start.waitForLine(/gateway listening/);
    const body = JSON.stringify({
      model: MODEL,
      messages: [{ role: "user", content: "Summarise the repository layout, please. ".repeat(20) }],
      max_tokens: 2,
    });
    // Each request makes the engine publish a batch; the gateway's view catches up within a few, never by time.
    let receipt: { cached_tokens?: number; expected_cached_tokens?: number } = {};
    for (let i = 0; i < 50 && !((receipt.expected_cached_tokens ?? 0) > 0); i++) {
      const response = await fetch(`http://127.0.0.1:${gatewayPort}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-session-id": "start-kv" },
        body,
      });
      expect(response.status).toBe(200);
      receipt = ((await response.json()) as { x_agent_serve: typeof receipt }).x_agent_serve;
    }
    expect(receipt, start.output()).toHaveProperty("expected_cached_tokens");
    expect(receipt.expected_cached_tokens).toBeGreaterThan(0);
    expect(receipt.expected_cached_tokens).toBe(receipt.cached_tokens);
    await stopProcess(start, "SIGTERM");
  });
});
