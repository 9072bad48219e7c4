// Real compute, real faults: two `agent-serve engine` processes (llama.cpp, temperature 0) behind the gateway, each
// behind a stream tap (test/helpers/stream-tap.ts) that records what the gateway got from it. An answer cut
// mid-stream (by the tap, or by SIGKILL of the engine) is continued on the other engine and compared with the
// answer without the fault.
//
// What holds, and is asserted: the continued answer is the text relayed before the cut plus exactly what the other
// engine generates when asked to continue that text (the request the gateway sends); the continuation's prompt is
// the no-fault prompt's ids followed by the relayed text, re-tokenized; where that re-tokenization gives back the
// ids the text was generated as, the continued answer is the no-fault one, token for token; and continuing from
// the token ids themselves (a completions prompt of ids) always gives the no-fault reply's remaining ids. Where
// the re-tokenized ids differ (a random-weight model often generates non-canonical tokenizations) the answers
// differ after the cut: how often is measured by bench/engine/continuation-exactness.ts (bench/README.md).
//
// Where node-llama-cpp cannot load the tests are skipped with the engine's own message, except under CI=true.
import { afterAll, beforeAll, describe, expect, it, type TestContext } from "vitest";
import { ensureModel } from "../../src/engine/model-maker.js";
import type { Gateway } from "../../src/gateway/gateway.js";
import { gatewayOverSims, stopProcess } from "../helpers/processes.js";
import { answerWithIds, spawnRealEngine, type RealEngineProcess } from "../helpers/real-engines.js";
import { startStreamTap, type StreamTap } from "../helpers/stream-tap.js";

const MODEL = "random-llama-tiny";
const STARTUP_TIMEOUT_MS = 120_000;
const MAX_TOKENS = 48;
const CUT_AFTER_EVENTS = 6;
const KILLED_MAX_TOKENS = 200;

let engines: RealEngineProcess[] = [];
let taps: StreamTap[] = [];
let gateway: Gateway | undefined;
let unavailable: string | undefined;

beforeAll(async () => {
  const modelPath = await ensureModel("tiny");
  const started = await Promise.all(
    [0, 1].map(() => spawnRealEngine(modelPath, MODEL, ["--threads", "1", "--slots", "2"])),
  );
  engines = started.filter((e): e is RealEngineProcess => typeof e !== "string");
  unavailable = started.find((e): e is string => typeof e === "string");
  if (unavailable !== undefined) return;
  taps = await Promise.all(engines.map((e) => startStreamTap(e.url)));
  // Probes and ejections stay out of the way: each engine breaks a stream on purpose.
  gateway = await gatewayOverSims(taps, MODEL, {
    probe_interval_seconds: 300,
    ejection_consecutive_failures: 100,
    engine_metrics_interval_seconds: 0,
  });
}, STARTUP_TIMEOUT_MS);

afterAll(async () => {
  await gateway?.close(0);
  await Promise.all(taps.map((t) => t.close()));
  await Promise.all(engines.map((e) => stopProcess(e.process, "SIGKILL")));
});

function skipIfUnavailable(context: TestContext): void {
  if (unavailable !== undefined) context.skip();
}

type Api = "chat" | "completions" | "messages";
const PATHS: Record<Api, string> = {
  chat: "/v1/chat/completions",
  completions: "/v1/completions",
  messages: "/v1/messages",
};

async function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  expect(res.status, await res.clone().text()).toBe(200);
  return res;
}

interface Streamed {
  text: string;
  backend: string;
  migrated: { from: string[] } | undefined;
}

/** The answer text of one SSE event, in any of the three APIs' shapes. */
function eventText(event: Record<string, unknown>): string {
  const choice = (event["choices"] as { delta?: { content?: string }; text?: string }[] | undefined)?.[0];
  const delta = event["delta"] as { type?: string; text?: string } | undefined;
  return choice?.delta?.content ?? choice?.text ?? (delta?.type === "text_delta" ? (delta.text ?? "") : "");
}

/** A streamed answer through the gateway. */
async function viaGateway(api: Api, body: object, session: string): Promise<Streamed> {
  const res = await post(
    `${gateway!.url}${PATHS[api]}`,
    { ...body, stream: true },
    { "x-session-id": session },
  );
  const decoder = new TextDecoder();
  let pending = "";
  const out: Streamed = { text: "", backend: "", migrated: undefined };
  for await (const bytes of res.body!) {
    pending += decoder.decode(bytes as Uint8Array, { stream: true });
    let end: number;
    while ((end = pending.indexOf("\n\n")) >= 0) {
      const data = pending
        .slice(0, end)
        .split("\n")
        .find((line) => line.startsWith("data: {"));
      pending = pending.slice(end + 2);
      if (data === undefined) continue;
      const event = JSON.parse(data.slice("data: ".length)) as Record<string, unknown>;
      expect(event["error"] ?? (event["type"] === "error" ? event : undefined)).toBeUndefined();
      const meta = (event["x_agent_serve"] ??
        (event["message"] as Record<string, unknown> | undefined)?.["x_agent_serve"]) as
        { backend_id?: string; migrated?: { from: string[] } } | undefined;
      out.backend ||= meta?.backend_id ?? "";
      out.migrated ??= meta?.migrated;
      const text = eventText(event);
      if (text === "") continue;
      out.text += text;
    }
  }
  return out;
}

const chatBody = (topic: string, maxTokens = MAX_TOKENS) => ({
  model: MODEL,
  temperature: 0,
  max_tokens: maxTokens,
  ignore_eos: true,
  messages: [
    { role: "system", content: "You answer briefly." },
    { role: "user", content: `Tell me about ${topic}.` },
  ],
});

/** The chat request the gateway sends to continue `prefix` (src/gateway/continuation/continuation-body.ts). */
const chatContinuation = (body: ReturnType<typeof chatBody>, prefix: string, generated: number) => ({
  ...body,
  max_tokens: body.max_tokens - generated,
  messages: [...body.messages, { role: "assistant", content: prefix }],
  continue_final_message: true,
  add_generation_prompt: false,
});

/** Backends are small-0 and small-1 (gatewayOverSims), in the order of `engines`. */
const engineIndex = (backend: string): number => Number(backend.slice(-1));

/**
 * Compares a continued chat answer with the no-fault one, token by token where the engine tells its ids. Returns
 * whether the re-tokenized prefix gave back the generated ids.
 */
async function compareChat(
  body: ReturnType<typeof chatBody>,
  reference: Streamed,
  continued: Streamed,
  cut: { text: string; textEvents: number },
  engineUrls: { noFault: string; other: string },
): Promise<boolean> {
  const other = engineUrls.other;
  // The first engine decodes greedily: the text before the cut is the no-fault answer's.
  expect(reference.text.startsWith(cut.text)).toBe(true);
  expect(continued.migrated?.from).toEqual([reference.backend]);
  const noFault = await answerWithIds(engineUrls.noFault, "chat", body);
  expect(noFault.text).toBe(reference.text);
  // Every token the model generates is whole characters, one text event each: the cut is after this many tokens.
  const generated = noFault.replyIds.slice(0, cut.textEvents);
  // The spliced answer is the relayed text plus exactly the other engine's continuation of it.
  const resumed = await answerWithIds(other, "chat", chatContinuation(body, cut.text, cut.textEvents));
  expect(continued.text).toBe(cut.text + resumed.text);
  // Its prompt: the conversation's ids as in the no-fault prompt (assistant header included, no end of turn),
  // then the relayed text tokenized on its own.
  expect(resumed.promptIds.slice(0, noFault.promptIds.length)).toEqual(noFault.promptIds);
  const idsLineUp =
    resumed.promptIds.length === noFault.promptIds.length + generated.length &&
    generated.every((id, i) => resumed.promptIds[noFault.promptIds.length + i] === id);
  if (idsLineUp) expect(continued.text).toBe(reference.text);
  // From the token ids themselves the other engine goes on exactly as the first did.
  const fromIds = await answerWithIds(other, "completions", {
    model: MODEL,
    temperature: 0,
    ignore_eos: true,
    max_tokens: body.max_tokens - cut.textEvents,
    prompt: [...noFault.promptIds, ...generated],
  });
  expect(fromIds.replyIds).toEqual(noFault.replyIds.slice(cut.textEvents));
  expect(cut.text + fromIds.text).toBe(reference.text);
  return idsLineUp;
}

describe("an answer cut mid-stream on a real llama.cpp engine, continued on another", () => {
  it("a cut chat stream goes on with the other engine's continuation of the relayed text", async (context) => {
    skipIfUnavailable(context);
    const lineUps: boolean[] = [];
    for (const topic of ["harbour tides", "sourdough", "railway timetables"]) {
      const body = chatBody(topic);
      const reference = await viaGateway("chat", body, `cut-${topic}`);
      const tap = taps[engineIndex(reference.backend)]!;
      tap.cutNextAfter(CUT_AFTER_EVENTS);
      const continued = await viaGateway("chat", body, `cut-${topic}`);
      const cut = tap.streams.at(-1)!;
      expect(cut).toMatchObject({ broken: true, textEvents: CUT_AFTER_EVENTS });
      const first = engineIndex(reference.backend);
      const urls = { noFault: engines[first]!.url, other: engines[1 - first]!.url };
      lineUps.push(await compareChat(body, reference, continued, cut, urls));
    }
    context.annotate(`re-tokenized prefix gave back the generated ids: ${lineUps.join(", ")}`);
  });

  it("a Messages prefill is continued as chat's continue_final_message: same prompt, same text", async (context) => {
    skipIfUnavailable(context);
    const body = {
      model: MODEL,
      max_tokens: MAX_TOKENS,
      temperature: 0,
      ignore_eos: true,
      system: "You answer briefly.",
      messages: [{ role: "user", content: "Tell me about bicycles." }],
    };
    const reference = await viaGateway("messages", body, "cut-messages");
    const first = engineIndex(reference.backend);
    taps[first]!.cutNextAfter(CUT_AFTER_EVENTS);
    const continued = await viaGateway("messages", body, "cut-messages");
    const cut = taps[first]!.streams.at(-1)!;
    expect(cut).toMatchObject({ broken: true, textEvents: CUT_AFTER_EVENTS });
    expect(reference.text.startsWith(cut.text)).toBe(true);
    expect(continued.migrated?.from).toEqual([reference.backend]);
    const other = engines[1 - first]!.url;
    // The request the gateway sends: the relayed text as a trailing assistant message.
    const prefilled = {
      ...body,
      stream: false,
      max_tokens: MAX_TOKENS - cut.textEvents,
      messages: [...body.messages, { role: "assistant", content: [{ type: "text", text: cut.text }] }],
    };
    const resumed = (await (await post(`${other}/v1/messages`, prefilled)).json()) as {
      content: { text: string }[];
      usage: { input_tokens: number; cache_read_input_tokens: number };
    };
    expect(continued.text).toBe(cut.text + (resumed.content[0]?.text ?? ""));
    // The prefill renders as chat's open final message: the same prompt ids, the same continuation.
    const chat = chatContinuation(
      { ...chatBody(""), messages: [{ role: "system", content: body.system }, ...body.messages] },
      cut.text,
      cut.textEvents,
    );
    const asChat = await answerWithIds(other, "chat", chat);
    expect(resumed.usage.input_tokens + resumed.usage.cache_read_input_tokens).toBe(asChat.promptIds.length);
    expect(resumed.content[0]?.text).toBe(asChat.text);
  });

  it("a completions stream cut mid-answer goes on from prompt + text", async (context) => {
    skipIfUnavailable(context);
    const body = {
      model: MODEL,
      temperature: 0,
      max_tokens: MAX_TOKENS,
      ignore_eos: true,
      prompt: "Notes on lighthouses:\n",
    };
    const reference = await viaGateway("completions", body, "cut-completions");
    const first = engineIndex(reference.backend);
    taps[first]!.cutNextAfter(CUT_AFTER_EVENTS);
    const continued = await viaGateway("completions", body, "cut-completions");
    const cut = taps[first]!.streams.at(-1)!;
    expect(cut).toMatchObject({ broken: true, textEvents: CUT_AFTER_EVENTS });
    expect(reference.text.startsWith(cut.text)).toBe(true);
    const other = engines[1 - first]!.url;
    const resumed = await answerWithIds(other, "completions", {
      ...body,
      max_tokens: MAX_TOKENS - cut.textEvents,
      prompt: body.prompt + cut.text,
    });
    expect(continued.text).toBe(cut.text + resumed.text);
    const noFault = await answerWithIds(engines[first]!.url, "completions", body);
    const fromIds = await answerWithIds(other, "completions", {
      ...body,
      max_tokens: MAX_TOKENS - cut.textEvents,
      prompt: [...noFault.promptIds, ...noFault.replyIds.slice(0, cut.textEvents)],
    });
    expect(cut.text + fromIds.text).toBe(reference.text);
  });

  // Last: it kills an engine.
  it("an engine SIGKILLed mid-stream: the answer goes on from the other engine, compared token by token", async (context) => {
    skipIfUnavailable(context);
    // A long answer (this model decodes hundreds of tokens a second): the kill lands well before its end.
    const body = chatBody("lighthouse keepers", KILLED_MAX_TOKENS);
    const reference = await viaGateway("chat", body, "killed");
    const first = engineIndex(reference.backend);
    const victim = engines[first]!;
    let killed: Promise<void> | undefined;
    // The kill goes out as the engine's 4th token passes its tap: what it wrote before dying still arrives.
    taps[first]!.whenNextReaches(4, () => (killed = stopProcess(victim.process, "SIGKILL")));
    const continued = await viaGateway("chat", body, "killed");
    await killed;
    const cut = taps[first]!.streams.at(-1)!;
    expect(cut.broken).toBe(true);
    expect(cut.textEvents).toBeGreaterThanOrEqual(4);
    expect(cut.textEvents).toBeLessThan(KILLED_MAX_TOKENS);
    // The engine is gone: the other one (same model, same greedy decoding) gives the no-fault ids.
    const survivor = engines[1 - first]!.url;
    const lineUp = await compareChat(body, reference, continued, cut, { noFault: survivor, other: survivor });
    context.annotate(
      `cut after ${cut.textEvents} tokens; re-tokenized prefix gave back the generated ids: ${lineUp}`,
    );
  });
});
