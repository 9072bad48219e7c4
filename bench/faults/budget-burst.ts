// Budget overshoot: 300 concurrent requests of one agent against a 2,000-token budget, and one greedy request.
// node --import tsx bench/faults/budget-burst.ts [--requests N] [--max-tokens N]
import { pino } from "pino";
import { parseConfig } from "../../src/config/load.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { okAnswer, startEngine } from "./engines.js";

function flag(name: string, fallback: number): number {
  const at = process.argv.indexOf(name);
  return at < 0 ? fallback : Number(process.argv[at + 1]);
}
const requests = flag("--requests", 300);
const maxTokens = flag("--max-tokens", 100);
const BUDGET = 2000;
/** The engine's usage: the prompt as a chat template would make it (33 tokens), and max_tokens generated. */
const PROMPT_TOKENS = 33;

const engine = await startEngine((_req, res, body) => {
  const asked = (JSON.parse(body.toString()) as { max_tokens?: number }).max_tokens ?? 4096;
  setTimeout(() => okAnswer(res, PROMPT_TOKENS, asked), 50); // all of the burst in flight together
});
const gateway = await Gateway.start(
  parseConfig(
    {
      server: { host: "127.0.0.1", port: 0 },
      admission: { default_token_budget: BUDGET },
      backends: [{ id: "only", tier: "small", base_url: engine.url, model: "m", max_inflight: 1024 }],
    },
    "bench",
  ),
  { logger: pino({ level: "silent" }) },
);
async function ask(agent: string, tokens: number): Promise<number> {
  const response = await fetch(`${gateway.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-agent-id": agent },
    body: JSON.stringify({
      model: "m",
      max_tokens: tokens,
      messages: [{ role: "user", content: "hello there" }],
    }),
  });
  await response.arrayBuffer();
  return response.status;
}
const statuses = await Promise.all(Array.from({ length: requests }, () => ask("bursty", maxTokens)));
const now = gateway.runtime.clock.nowMs();
const used = await gateway.runtime.budgets.usage("bursty", now);
const greedyStatus = await ask("greedy", 20_000);
const greedy = await gateway.runtime.budgets.usage("greedy", gateway.runtime.clock.nowMs());
console.log(
  JSON.stringify({
    budget: BUDGET,
    burst: {
      requests,
      maxTokens,
      admitted: statuses.filter((s) => s === 200).length,
      refused429: statuses.filter((s) => s === 429).length,
      charged: used,
      overshoot: Math.round((used / BUDGET) * 100) / 100,
    },
    greedy: {
      maxTokens: 20_000,
      status: greedyStatus,
      charged: greedy,
      overshoot: Math.round((greedy / BUDGET) * 100) / 100,
    },
  }),
);
await gateway.close(0);
await engine.close();
