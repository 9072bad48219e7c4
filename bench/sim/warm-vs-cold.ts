// Benchmark: time to first token of cold vs warm turns of agent sessions on one simulated engine, at concurrency 1.
//
// Each session opens with its own 3 KB system prompt (so its first turn is cold: nothing of it is cached), then
// runs 6 turns, sending back the whole history each time as agents do. Time to first token is measured by the
// client, from sending the request to the first content delta of the stream, in wall-clock milliseconds.
//
//   node --import tsx bench/sim/warm-vs-cold.ts [--profile qwen2.5-7b] [--sessions 8] [--turns 6]
//                                              [--max-tokens 96] [--time-scale 1]
import { parseArgs } from "node:util";
import { startSimEngine } from "../../src/sim/index.js";
import { fixed, mean, percentile } from "./stats.js";

const { values } = parseArgs({
  options: {
    profile: { type: "string", default: "qwen2.5-7b" },
    sessions: { type: "string", default: "8" },
    turns: { type: "string", default: "6" },
    "max-tokens": { type: "string", default: "96" },
    "time-scale": { type: "string", default: "1" },
  },
});
const sessions = Number(values.sessions);
const turns = Number(values.turns);
const maxTokens = Number(values["max-tokens"]);
const timeScale = Number(values["time-scale"]);
const SYSTEM_PROMPT_BYTES = 3072;

interface Message {
  role: "system" | "user" | "assistant";
  content: string;
}

interface TurnResult {
  ttftMs: number;
  e2eMs: number;
  promptTokens: number;
  cachedTokens: number;
}

function systemPrompt(session: number): string {
  const rules =
    "You are a software agent working in a repository. Read files before editing them, keep changes small, " +
    "run the tests after each change and report what you did in one short paragraph. ";
  return `Session ${session}. ${rules.repeat(20)}`.slice(0, SYSTEM_PROMPT_BYTES);
}

function userMessage(session: number, turn: number): string {
  return (
    `Step ${turn} of session ${session}: open src/module${turn}.ts, explain what its exported functions do, ` +
    `then propose one refactoring that would make it easier to test. Keep the answer short.`
  );
}

async function runTurn(
  url: string,
  model: string,
  messages: Message[],
): Promise<TurnResult & { text: string }> {
  const started = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      model,
      messages,
      max_tokens: maxTokens,
      ignore_eos: true, // replies of exactly max_tokens, so every run generates the same tokens
      stream: true,
      stream_options: { include_usage: true },
    }),
  });
  if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}: ${await res.text()}`);
  const decoder = new TextDecoder();
  let buffer = "";
  let text = "";
  let ttftMs = Number.NaN;
  let promptTokens = 0;
  let cachedTokens = 0;
  for await (const bytes of res.body) {
    buffer += decoder.decode(bytes, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const chunk = JSON.parse(event.slice(6)) as {
        choices: { delta: { content?: string } }[];
        usage?: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } };
      };
      const content = chunk.choices[0]?.delta.content ?? "";
      if (content.length > 0 && Number.isNaN(ttftMs)) ttftMs = performance.now() - started;
      text += content;
      if (chunk.usage) {
        promptTokens = chunk.usage.prompt_tokens;
        cachedTokens = chunk.usage.prompt_tokens_details.cached_tokens;
      }
    }
  }
  return { ttftMs, e2eMs: performance.now() - started, promptTokens, cachedTokens, text };
}

const engine = await startSimEngine({ profile: values.profile, timeScale });
const byTurn: TurnResult[][] = Array.from({ length: turns }, () => []);
try {
  for (let session = 0; session < sessions; session++) {
    const messages: Message[] = [{ role: "system", content: systemPrompt(session) }];
    for (let turn = 0; turn < turns; turn++) {
      messages.push({ role: "user", content: userMessage(session, turn) });
      const result = await runTurn(engine.url, engine.model, messages);
      byTurn[turn]!.push(result);
      messages.push({ role: "assistant", content: result.text });
    }
  }
} finally {
  await engine.close();
}

console.log(
  `profile ${values.profile}, time-scale ${timeScale}, ${sessions} sessions x ${turns} turns, concurrency 1, ` +
    `${SYSTEM_PROMPT_BYTES} B system prompt, max_tokens ${maxTokens}`,
);
console.log("turn | prompt tok | cached tok | TTFT p50 ms | TTFT mean ms | E2E p50 ms");
byTurn.forEach((results, turn) => {
  const ttfts = results.map((r) => r.ttftMs);
  console.log(
    `${turn + 1} | ${fixed(mean(results.map((r) => r.promptTokens)), 0)} | ` +
      `${fixed(mean(results.map((r) => r.cachedTokens)), 0)} | ${fixed(percentile(ttfts, 50))} | ` +
      `${fixed(mean(ttfts))} | ${fixed(
        percentile(
          results.map((r) => r.e2eMs),
          50,
        ),
      )}`,
  );
});
const cold = byTurn[0]!.map((r) => r.ttftMs);
const warm = byTurn.slice(1).flatMap((results) => results.map((r) => r.ttftMs));
const ratio = percentile(cold, 50) / percentile(warm, 50);
console.log(
  `cold TTFT p50 ${fixed(percentile(cold, 50))} ms, warm TTFT p50 ${fixed(percentile(warm, 50))} ms ` +
    `(p90 ${fixed(percentile(warm, 90))} ms): cold/warm = ${fixed(ratio, 2)}x`,
);
if (ratio < 3) {
  console.error("FAIL: warm turns are less than 3x faster to first token than cold turns");
  process.exitCode = 1;
}
