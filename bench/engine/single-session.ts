// Cold vs warm turns through the gateway on two real llama.cpp engines, one session at a time (no contention).
//
// node --import tsx bench/engine/single-session.ts [sessions]
// Each session has its own 3 KB system prompt and 6 turns (max_tokens 16), sent one after another: once with
// affinity, once with TTL 0 and round-robin placement (every turn changes engine). Prints p50s in wall-clock ms.
import { StudyEnvironment } from "../../src/study/environment.js";
import { runSessions, type RequestRecord } from "../../src/study/session-runner.js";
import { percentile } from "../../src/study/stats.js";
import { generateWorkload } from "../../src/study/workload.js";

const MODEL = "random-llama-small";
const sessionsPerPolicy = Number(process.argv[2] ?? 4);
const engines = [0, 1].map((i) => ({ id: `small-${i}`, tier: "small", profile: "-", model: MODEL }));
const policies = [
  { name: "affinity (TTL 1800 s)", affinity: { sticky_ttl_seconds: 1800 } },
  { name: "TTL 0, round-robin", affinity: { sticky_ttl_seconds: 0, balancer: "round_robin" } },
];

const p50 = (records: RequestRecord[], pick: (r: RequestRecord) => number): string =>
  percentile(records.map(pick), 50).toFixed(0);

process.stdout.write(
  "| policy | cold TTFT p50 | cold E2E p50 | warm TTFT p50 | warm E2E p50 | cached prompt tokens |\n" +
    "| --- | --- | --- | --- | --- | --- |\n",
);
for (const policy of policies) {
  const env = await StudyEnvironment.start({
    engines,
    engineKind: "real",
    config: { affinity: policy.affinity },
    timeScale: 1,
    seed: 1,
  });
  try {
    const sessions = generateWorkload({
      seed: 7,
      sessions: sessionsPerPolicy,
      turns: 6,
      systemPromptChars: 3000,
      sharedSystemPrompt: false,
      userChars: 300,
      maxTokens: 16,
      toolCallRate: 0,
      thinkTimeMs: 0,
      idPrefix: policy.name,
    });
    const records = await runSessions({
      condition: policy.name,
      sessions,
      concurrency: 1,
      pool: env.pool,
      timeScale: 1,
      stream: true,
      model: MODEL,
    });
    if (records.some((r) => !r.ok)) throw new Error(`${policy.name}: a request failed`);
    const cold = records.filter((r) => r.turn === 1);
    const warm = records.filter((r) => r.turn > 1);
    const cached = records.reduce((sum, r) => sum + r.cachedTokens, 0);
    const prompt = records.reduce((sum, r) => sum + r.promptTokens, 0);
    process.stdout.write(
      `| ${policy.name} | ${p50(cold, (r) => r.ttftMs!)} ms | ${p50(cold, (r) => r.e2eMs)} ms | ` +
        `${p50(warm, (r) => r.ttftMs!)} ms | ${p50(warm, (r) => r.e2eMs)} ms | ` +
        `${((cached / prompt) * 100).toFixed(1)}% |\n`,
    );
  } finally {
    await env.close();
  }
}
