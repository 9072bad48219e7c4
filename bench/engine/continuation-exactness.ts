// How often an answer cut mid-stream and continued on another real llama.cpp engine (temperature 0) equals the
// answer without the fault, and where it differs, why.
//
// node --import tsx bench/engine/continuation-exactness.ts [--prompts 12] [--cuts 2,6,14] [--max-tokens 32]
//                                                          [--size small] [--apis chat,completions]
// Two engines in this process (half the cores each), each behind a stream tap (test/helpers/stream-tap.ts), behind
// an in-process gateway. Per prompt and cut point k, on each API:
//   1. the no-fault answer through the gateway (streamed), and the same request straight to the engine that
//      served it with return_token_ids: its prompt ids P and reply ids R;
//   2. the same request with the serving engine's stream cut by its tap after k text events: the gateway continues
//      it on the other engine (chat: continue_final_message; completions: prompt + text);
//   3. straight to that other engine: the continuation request the gateway sent (return_token_ids: its prompt ids),
//      and the continuation from token ids (a completions prompt of P + R[0..k], where the API's ids allow it).
// Every generated token of the model is whole characters (src/engine/model-maker.ts), so k text events are k tokens.
import { availableParallelism, cpus, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { pino } from "pino";
import { parseConfig } from "../../src/config/load.js";
import { startRealEngine, type RealEngineHandle } from "../../src/engine/index.js";
import { Gateway } from "../../src/gateway/gateway.js";
import { answerWithIds, type AnswerIds } from "../../test/helpers/real-engines.js";
import { startStreamTap, type StreamTap } from "../../test/helpers/stream-tap.js";

const { values } = parseArgs({
  options: {
    prompts: { type: "string", default: "12" },
    cuts: { type: "string", default: "2,6,14" },
    "max-tokens": { type: "string", default: "32" },
    size: { type: "string", default: "small" },
    apis: { type: "string", default: "chat,completions" },
  },
});
const PROMPTS = Number(values.prompts);
const CUTS = values.cuts.split(",").map(Number);
const MAX_TOKENS = Number(values["max-tokens"]);
const APIS = values.apis.split(",") as Api[];
const MODEL = "bench-model";

type Api = "chat" | "completions";

const TOPICS = [
  "the tide tables of a small harbour",
  "how a gateway keeps sessions on one engine",
  "a recipe for bread with three ingredients",
  "why caches make the second request faster",
  "the history of the printing press",
  "packing for a week of hiking in the rain",
  "what a prefix cache stores and for how long",
  "three ways to read a railway timetable",
  "the rules of a card game for two players",
  "a short letter to a neighbour about a fence",
  "the parts of a bicycle and what each does",
  "how to explain recursion to a child",
  "the care of a sourdough starter over a holiday",
  "a weather report for a mountain pass",
  "the steps of changing a flat tyre",
  "a museum guide's notes on one painting",
];

function requestBody(api: Api, index: number, extra: Record<string, unknown>): Record<string, unknown> {
  const topic = TOPICS[index % TOPICS.length]!;
  const common = { model: MODEL, temperature: 0, max_tokens: MAX_TOKENS, ignore_eos: true, ...extra };
  return api === "chat"
    ? {
        ...common,
        messages: [
          { role: "system", content: `You answer briefly. Case ${index}.` },
          { role: "user", content: `Tell me about ${topic}.` },
        ],
      }
    : { ...common, prompt: `Notes on ${topic} (case ${index}):\n` };
}

const path = (api: Api): string => (api === "chat" ? "/v1/chat/completions" : "/v1/completions");

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(`${url}: ${res.status} ${await res.text()}`);
  return res;
}

/** A non-streamed answer straight from an engine, with its token ids. */
const direct = (engine: RealEngineHandle, api: Api, body: Record<string, unknown>): Promise<AnswerIds> =>
  answerWithIds(engine.url, api, body);

/** A streamed answer through the gateway: its text, the engine that started it, and its migration record. */
async function viaGateway(
  gateway: Gateway,
  api: Api,
  body: Record<string, unknown>,
  session: string,
): Promise<{ text: string; backend: string; migrated: unknown }> {
  const res = await post(
    `${gateway.url}${path(api)}`,
    { ...body, stream: true },
    { "x-session-id": session },
  );
  const raw = await res.text();
  let text = "";
  let backend = "";
  let migrated: unknown;
  for (const event of raw.split("\n\n")) {
    if (!event.startsWith("data: {")) continue;
    const chunk = JSON.parse(event.slice("data: ".length)) as {
      choices?: { delta?: { content?: string }; text?: string }[];
      x_agent_serve?: { backend_id?: string; migrated?: unknown };
      error?: { message: string };
    };
    if (chunk.error) throw new Error(`stream ended in an error: ${chunk.error.message}`);
    text += chunk.choices?.[0]?.delta?.content ?? chunk.choices?.[0]?.text ?? "";
    backend ||= chunk.x_agent_serve?.backend_id ?? "";
    migrated ??= chunk.x_agent_serve?.migrated;
  }
  return { text, backend, migrated };
}

/** The continuation request the gateway sends (src/gateway/continuation/continuation-body.ts), not streamed. */
function continuationRequest(api: Api, body: Record<string, unknown>, prefix: string, k: number) {
  const lowered = { ...body, max_tokens: MAX_TOKENS - k };
  if (api === "completions") return { ...lowered, prompt: `${String(body["prompt"])}${prefix}` };
  return {
    ...lowered,
    messages: [...(body["messages"] as unknown[]), { role: "assistant", content: prefix }],
    continue_final_message: true,
    add_generation_prompt: false,
  };
}

const sameIds = (a: readonly number[], b: readonly number[]): boolean =>
  a.length === b.length && a.every((id, i) => id === b[i]);

/** Where two strings first differ (their common prefix length). */
function firstDifference(a: string, b: string): number {
  let i = 0;
  while (i < a.length && i < b.length && a[i] === b[i]) i++;
  return i;
}

interface Outcome {
  api: Api;
  prompt: number;
  cut: number;
  exact: boolean;
  /** The continuation's prompt ids are the no-fault prompt plus the reply's first k ids. */
  idsLineUp: boolean;
  /** Reply tokens at the end of the prefix that re-tokenized differently (0 when the ids line up). */
  retokenizedTail: number;
  /** The re-tokenization changed the prompt's own last ids too (the answer's text merged with the prompt's). */
  atPromptBoundary: boolean;
  /** The continuation from token ids (P + R[0..k]) equals the no-fault reply's rest. */
  fromIdsExact: boolean | undefined;
  /** The spliced answer is the cut prefix plus what the other engine continues from that text. */
  spliceFaithful: boolean;
  /** Characters after the cut where the continued answer first differs from the no-fault one (-1: equal). */
  divergesAfter: number;
}

async function run(): Promise<void> {
  const threads = Math.max(1, Math.floor(availableParallelism() / 2));
  const engines = await Promise.all(
    [0, 1].map(() => startRealEngine({ modelSize: values.size, servedModelName: MODEL, threads, slots: 2 })),
  );
  const taps: StreamTap[] = await Promise.all(engines.map((e) => startStreamTap(e.url)));
  const config = parseConfig(
    {
      server: { host: "127.0.0.1", port: 0 },
      health: {
        probe_interval_seconds: 300,
        failures_to_mark_down: 1000,
        ejection_consecutive_failures: 1000,
        engine_metrics_interval_seconds: 0,
      },
      backends: taps.map((t, i) => ({ id: `e${i}`, tier: "small", base_url: t.url, model: MODEL })),
    },
    "bench",
  );
  const gateway = await Gateway.start(config, {
    logger: pino({ level: "silent" }),
    listen: { host: "127.0.0.1", port: 0 },
  });
  const outcomes: Outcome[] = [];
  const started = performance.now();
  try {
    for (const api of APIS) {
      for (let p = 0; p < PROMPTS; p++) {
        const body = requestBody(api, p, {});
        for (const k of CUTS) {
          const session = `${api}-${p}-${k}`;
          const reference = await viaGateway(gateway, api, body, session);
          const first = Number(reference.backend.slice(1));
          const other = 1 - first;
          const ids = await direct(engines[first]!, api, body);
          taps[first]!.cutNextAfter(k);
          const continued = await viaGateway(gateway, api, body, session);
          const cut = taps[first]!.streams.at(-1)!;
          if (!cut.broken || continued.migrated === undefined)
            throw new Error(`${session}: the stream was not cut and continued`);
          const asked = continuationRequest(api, body, cut.text, cut.textEvents);
          const resumed = await direct(engines[other]!, api, asked);
          const expectedIds = [...ids.promptIds, ...ids.replyIds.slice(0, cut.textEvents)];
          const idsLineUp = sameIds(resumed.promptIds, expectedIds);
          let common = 0;
          while (common < expectedIds.length && resumed.promptIds[common] === expectedIds[common]) common++;
          const fromIds = await direct(engines[other]!, "completions", {
            model: MODEL,
            temperature: 0,
            ignore_eos: true,
            max_tokens: MAX_TOKENS - cut.textEvents,
            prompt: expectedIds,
          });
          const difference = firstDifference(continued.text, reference.text);
          outcomes.push({
            api,
            prompt: p,
            cut: k,
            exact: continued.text === reference.text,
            idsLineUp,
            retokenizedTail: idsLineUp ? 0 : expectedIds.length - common,
            atPromptBoundary: !idsLineUp && common < ids.promptIds.length,
            fromIdsExact: sameIds(fromIds.replyIds, ids.replyIds.slice(cut.textEvents)),
            spliceFaithful: continued.text === cut.text + resumed.text,
            divergesAfter: continued.text === reference.text ? -1 : difference - cut.text.length,
          });
          const o = outcomes.at(-1)!;
          process.stderr.write(
            `${session}: exact ${o.exact} idsLineUp ${o.idsLineUp} (tail ${o.retokenizedTail}) ` +
              `fromIds ${o.fromIdsExact} splice ${o.spliceFaithful} divergesAfter ${o.divergesAfter}\n`,
          );
        }
      }
    }
  } finally {
    await gateway.close(0);
    await Promise.all(taps.map((t) => t.close()));
    await Promise.all(engines.map((e) => e.close()));
  }
  report(outcomes, (performance.now() - started) / 1000);
}

function report(outcomes: Outcome[], seconds: number): void {
  const count = (list: Outcome[], pick: (o: Outcome) => boolean): string =>
    `${list.filter(pick).length}/${list.length}`;
  const lines = [
    `machine: ${cpus().length} cores (${cpus()[0]?.model ?? "?"}), load average ${loadavg()[0]!.toFixed(1)}, ` +
      `Node ${process.versions.node}; model ${values.size}, max_tokens ${MAX_TOKENS}, cuts ${CUTS.join(",")}, ` +
      `${PROMPTS} prompts per API; ${seconds.toFixed(0)} s`,
    "",
    "| API | runs | continued = no-fault | ids line up | exact where ids line up | exact where they do not | continued from ids = no-fault | splice = prefix + direct continuation |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const api of APIS) {
    const mine = outcomes.filter((o) => o.api === api);
    const aligned = mine.filter((o) => o.idsLineUp);
    const misaligned = mine.filter((o) => !o.idsLineUp);
    lines.push(
      `| ${api} | ${mine.length} | ${count(mine, (o) => o.exact)} | ${count(mine, (o) => o.idsLineUp)} | ` +
        `${count(aligned, (o) => o.exact)} | ${count(misaligned, (o) => o.exact)} | ` +
        `${count(mine, (o) => o.fromIdsExact === true)} | ${count(mine, (o) => o.spliceFaithful)} |`,
    );
  }
  const tails = outcomes
    .filter((o) => !o.idsLineUp)
    .map((o) => `${o.api} ${o.retokenizedTail}/${o.cut}${o.atPromptBoundary ? " (prompt boundary)" : ""}`);
  const diverged = outcomes.filter((o) => !o.exact).map((o) => o.divergesAfter);
  lines.push(
    "",
    `where the ids do not line up, the prefix tokens from the first differing id on / the cut: ${tails.join(", ") || "none"}`,
    `characters after the cut where a continued answer first differs: ${diverged.join(", ") || "none"}`,
  );
  process.stdout.write(`${lines.join("\n")}\n`);
}

await run();
