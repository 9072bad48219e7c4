// Time to eject an engine whose /health passes while its completions hang, under the default config.
// node --import tsx bench/faults/hung-engine.ts
import { pino } from "pino";
import { parseConfig } from "../../src/config/load.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { okAnswer, startEngine } from "./engines.js";

const hung = await startEngine(() => undefined); // never answers
const good = await startEngine((_req, res) => okAnswer(res, 10, 5));
const gateway = await Gateway.start(
  parseConfig(
    {
      server: { host: "127.0.0.1", port: 0 },
      backends: [
        { id: "hung", tier: "small", base_url: hung.url, model: "m" },
        { id: "good", tier: "small", base_url: good.url, model: "m" },
      ],
    },
    "bench",
  ),
  { logger: pino({ level: "silent" }) },
);
const backends = gateway.runtime.registry.tier("small");
let session = "";
for (let i = 0; session === ""; i++)
  if (gateway.runtime.scheduler.ranking(`s-${i}`, backends)[0]!.id === "hung") session = `s-${i}`;
const startedMs = performance.now();
const ejected = new Promise<number>((resolve) =>
  gateway.runtime.registry.onHealthChange((t) => {
    if (t.backend.id === "hung" && t.to === "down") resolve(performance.now() - startedMs);
  }),
);
const answer = fetch(`${gateway.url}/v1/chat/completions`, {
  method: "POST",
  headers: { "content-type": "application/json", "x-session-id": session },
  body: JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "hi" }] }),
}).then(async (r) => ({
  status: r.status,
  backend: r.headers.get("x-agent-serve-backend"),
  ms: performance.now() - startedMs,
  text: await r.text(),
}));
const ejectMs = await ejected;
const done = await answer;
console.log(
  JSON.stringify({
    ejectSeconds: Math.round(ejectMs / 100) / 10,
    answerStatus: done.status,
    answeredBy: done.backend,
    answerSeconds: Math.round(done.ms / 100) / 10,
  }),
);
await gateway.close(0);
await hung.close();
await good.close();
