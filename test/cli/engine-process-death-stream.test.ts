// Real child processes: a simulated engine SIGKILLed while it streams an answer. The client's stream goes on,
// continued on the other engine (src/gateway/continuation), and reads the answer it would have read anyway.
import OpenAI from "openai";
import { afterAll, describe, expect, it } from "vitest";
import type { Gateway } from "../../src/gateway/gateway.js";
import { SMALL_MODEL } from "../helpers/cluster.js";
import { gatewayOverSims, spawnSim, stopProcess, type CliProcess } from "../helpers/processes.js";

describe("engine process killed mid-stream", () => {
  const sims: CliProcess[] = [];
  let gateway: Gateway | undefined;
  afterAll(async () => {
    await gateway?.close(0);
    await Promise.all(sims.map((s) => stopProcess(s, "SIGKILL")));
  });

  it("the answer streams on from the other engine: the same text and usage as without the kill", async () => {
    // A timed profile (about 12 ms a token): the kill lands while the answer is being generated.
    const engines = await Promise.all(
      [0, 1].map(() => spawnSim(["--model", SMALL_MODEL, "--profile", "qwen2.5-7b", "--seed", "21"])),
    );
    sims.push(...engines);
    gateway = await gatewayOverSims(engines, SMALL_MODEL, { probe_interval_seconds: 30 });
    const client = new OpenAI({
      baseURL: `${gateway.url}/v1`,
      apiKey: "none",
      maxRetries: 0,
      defaultHeaders: { "x-session-id": "killed-mid-stream" },
    });
    const ask = async (midway?: (backend: string) => void) => {
      const stream = await client.chat.completions.create({
        model: SMALL_MODEL,
        messages: [{ role: "user", content: "Describe the gateway in detail." }],
        max_tokens: 80,
        stream: true,
        stream_options: { include_usage: true },
      });
      let text = "";
      let chunks = 0;
      let usage: OpenAI.CompletionUsage | undefined;
      let meta: Record<string, unknown> | undefined;
      let first: string | undefined;
      for await (const chunk of stream) {
        const seen = (chunk as unknown as { x_agent_serve?: Record<string, unknown> }).x_agent_serve;
        if (seen !== undefined) meta = seen;
        first ??= seen?.["backend_id"] as string | undefined;
        const content = chunk.choices[0]?.delta.content;
        if (content) {
          text += content;
          if (++chunks === 5 && first !== undefined) midway?.(first);
        }
        if (chunk.usage) usage = chunk.usage;
      }
      return { text, usage, meta, first };
    };
    const reference = await ask();
    let killed: Promise<void> | undefined;
    const continued = await ask((backend) => {
      killed = stopProcess(engines[Number(backend.slice(-1))]!, "SIGKILL");
    });
    await killed;
    expect(continued.first).toBe(reference.first);
    expect(continued.text).toBe(reference.text);
    expect(continued.usage?.prompt_tokens).toBe(reference.usage?.prompt_tokens);
    expect(continued.usage?.completion_tokens).toBe(reference.usage?.completion_tokens);
    expect(continued.meta?.["migrated"]).toMatchObject({ from: [reference.first] });
  });
});
