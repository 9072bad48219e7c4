// Benchmark: the simulator's wall-time behaviour, measured here rather than asserted in tests (a loaded CI machine
// stalls timers): the added latency of the `slow` fault, and how a timed profile spaces its streamed tokens.
//
//   node --import tsx bench/sim/wall-time.ts [--runs 5]
import { parseArgs } from "node:util";
import { startSimEngine, type SimEngineHandle } from "../../src/sim/index.js";
import { fixed, percentile } from "./stats.js";

const { values } = parseArgs({ options: { runs: { type: "string", default: "5" } } });
const runs = Number(values.runs);
const EXTRA_LATENCY_MS = 120;

function chat(engine: SimEngineHandle, body: object): Promise<Response> {
  return fetch(`${engine.url}/v1/chat/completions`, { method: "POST", body: JSON.stringify(body) });
}

/** The `slow` fault: each generation request waits extraLatencyMs more (the test checks only that it answers). */
async function slowFault(): Promise<number[]> {
  const engine = await startSimEngine({ profile: "instant" });
  try {
    const request = { messages: [{ role: "user", content: "hello" }], max_tokens: 8 };
    await (await chat(engine, request)).text(); // warm-up: the first request pays for connecting and JIT
    const plain: number[] = [];
    const slowed: number[] = [];
    for (let i = 0; i < runs; i++) {
      const started = performance.now();
      await (await chat(engine, request)).text();
      plain.push(performance.now() - started);
    }
    engine.setFault({ kind: "slow", extraLatencyMs: EXTRA_LATENCY_MS });
    for (let i = 0; i < runs; i++) {
      const started = performance.now();
      await (await chat(engine, request)).text();
      slowed.push(performance.now() - started);
    }
    return [percentile(plain, 50), percentile(slowed, 50), Math.min(...slowed)];
  } finally {
    await engine.close();
  }
}

/** qwen2.5-7b at time scale 0.1 (a decode step ~118 ms): when 5 streamed tokens arrive, and in how many reads. */
async function timedStream(): Promise<{ lastTokenMs: number; reads: number }[]> {
  const engine = await startSimEngine({ profile: "qwen2.5-7b", timeScale: 0.1 });
  const results: { lastTokenMs: number; reads: number }[] = [];
  try {
    for (let i = 0; i < runs; i++) {
      const sentAt = performance.now();
      const res = await chat(engine, {
        messages: [{ role: "user", content: "Slowly, please." }],
        max_tokens: 5,
        stream: true,
      });
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      let reads = 0;
      let lastTokenMs = 0;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        reads++;
        if (value.includes('"content":"') && !value.includes('"content":""'))
          lastTokenMs = performance.now() - sentAt;
      }
      results.push({ lastTokenMs, reads });
    }
  } finally {
    await engine.close();
  }
  return results;
}

const [plainMs, slowMs, slowMinMs] = await slowFault();
console.log(
  `slow fault (+${EXTRA_LATENCY_MS} ms): median ${fixed(plainMs!, 1)} ms without, ${fixed(slowMs!, 1)} ms with ` +
    `(min ${fixed(slowMinMs!, 1)} ms), over ${runs} requests each`,
);
const streams = await timedStream();
console.log(
  `timed stream (5 tokens, decode step ~118 ms): last token at ${streams.map((s) => fixed(s.lastTokenMs, 0)).join(", ")} ms ` +
    `(floor: prefill + 4 steps > 472 ms); reads per stream ${streams.map((s) => s.reads).join(", ")}`,
);
