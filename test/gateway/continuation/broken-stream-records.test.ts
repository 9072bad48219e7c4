// Streams that end in an error event after part of the answer reached the client: the event says so, the log line
// names the error and its cause, agentserve_requests_total counts the error's status, and a stream the request
// cannot have continued (n > 1, the Responses API, continuation off) ends as it always did.
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { startSimEngine, type SimEngineHandle } from "../../../src/sim/index.js";
import { metricValue, scrape } from "../../helpers/cluster.js";
import {
  answerOk,
  post,
  startGatewayFor,
  startScriptedEngine,
  type TestGateway,
} from "../../helpers/faulty-engine.js";

/** A logger whose lines the test reads. */
function capturedLogger(): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString("utf8").split("\n"))
        if (line !== "") lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: "info" }, sink), lines };
}

const CHAT = {
  model: "sim-small",
  messages: [{ role: "user", content: "Say something long." }],
  max_tokens: 40,
  stream: true,
};

/** The data events of an SSE body: parsed JSON, or the raw text ([DONE]). */
function dataEvents(text: string): unknown[] {
  return text
    .split("\n\n")
    .filter((event) => event.startsWith("data: "))
    .map((event) => {
      const data = event.slice(6);
      return data === "[DONE]" ? data : (JSON.parse(data) as unknown);
    });
}

function requestLine(lines: Record<string, unknown>[]): Record<string, unknown> {
  const found = lines.filter((line) => line["msg"] === "request" && line["path"] !== "/metrics").at(-1);
  expect(found).toBeDefined();
  return found!;
}

describe("streams that end in an error event", () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  async function simEngines(count: number): Promise<SimEngineHandle[]> {
    const engines: SimEngineHandle[] = [];
    for (let i = 0; i < count; i++) {
      const engine = await startSimEngine({ profile: "instant", model: "sim-small", seed: 5 });
      closers.push(() => engine.close());
      engines.push(engine);
    }
    return engines;
  }

  async function gatewayFor(
    engines: { url: string }[],
    overrides: Record<string, unknown> = {},
  ): Promise<{ gw: TestGateway; lines: Record<string, unknown>[] }> {
    const { logger, lines } = capturedLogger();
    const gw = await startGatewayFor(
      engines.map((engine, i) => ({ id: `e${i + 1}`, url: engine.url, model: "sim-small" })),
      { health: { probe_interval_seconds: 60 }, ...overrides },
      { logger },
    );
    closers.push(() => gw.close());
    return { gw, lines };
  }

  it("no engine left to continue: the error event says part was relayed; log, metric and status say it failed", async () => {
    const [engine] = await simEngines(1);
    engine!.setFault({ kind: "cut_stream", afterChunks: 5 });
    const { gw, lines } = await gatewayFor([engine!]);
    const answer = await post(gw.url, CHAT);
    expect(answer.status).toBe(200);
    const events = dataEvents(answer.text);
    const text = events
      .map((e) => (e as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta?.content ?? "")
      .join("");
    expect(text.length).toBeGreaterThan(0);
    const error = (events.at(-2) as { error: { message: string; code: string } }).error;
    expect(error.message).toMatch(
      /^backend e1 closed the connection mid-answer; no engine could continue the answer \(.+\), so it is incomplete$/,
    );
    expect(events.at(-1)).toBe("[DONE]");
    const line = requestLine(lines);
    expect(line).toMatchObject({
      status: 200,
      error: error.message,
      errorCode: "upstream_error",
      migrated: "failed from e1",
    });
    const metrics = await scrape(gw.url);
    expect(
      metricValue(metrics, "agentserve_requests_total", { tier: "small", backend: "e1", status: "502" }),
    ).toBe(1);
    expect(
      metricValue(metrics, "agentserve_requests_total", { tier: "small", backend: "e1", status: "200" }) ?? 0,
    ).toBe(0);
    expect(metricValue(metrics, "agentserve_migrations_total", { outcome: "failed" })).toBe(1);
  });

  it.each<[string, Record<string, unknown>, Record<string, unknown>, string]>([
    ["n > 1", { n: 2 }, {}, "not continued: more than one choice (n > 1)"],
    ["logprobs", { logprobs: true }, {}, "not continued: logprobs was asked for"],
    [
      "continuation off",
      {},
      { upstream: { stream_continuation: { enabled: false } } },
      "not continued: upstream.stream_continuation.enabled is false",
    ],
    [
      "a tier that forbids it",
      {},
      { upstream: { stream_continuation: { except_tiers: ["small"] } } },
      "not continued: tier 'small' is in upstream.stream_continuation.except_tiers",
    ],
  ])(
    "%s: the stream ends with its error event as before, though another engine is up",
    async (_name, fields, overrides, migrated) => {
      const engines = await simEngines(2);
      for (const engine of engines) engine.setFault({ kind: "cut_stream", afterChunks: 4 });
      const { gw, lines } = await gatewayFor(engines, overrides);
      const answer = await post(gw.url, { ...CHAT, ...fields }, { "x-session-id": "s" });
      const events = dataEvents(answer.text);
      const error = (events.at(-2) as { error: { message: string } }).error;
      expect(error.message).toMatch(/^backend e\d closed the connection mid-answer$/);
      expect(requestLine(lines)).toMatchObject({
        error: error.message,
        cause: "other side closed",
        migrated,
      });
      const metrics = await scrape(gw.url);
      expect(metricValue(metrics, "agentserve_migrations_total", { outcome: "impossible" })).toBe(1);
    },
  );

  it("an engine's error event mid-answer is withheld and the answer goes on on the next engine", async () => {
    const words = [" the", " and", " for"];
    const failing = await startScriptedEngine({
      completion: ({ res, body }) => {
        if ((JSON.parse(body.toString()) as { stream?: boolean }).stream !== true) return answerOk(res);
        res.writeHead(200, { "content-type": "text/event-stream" });
        const chunk = (delta: object) =>
          `data: ${JSON.stringify({ id: "chatcmpl-first", object: "chat.completion.chunk", created: 1, model: "sim-small", choices: [{ index: 0, delta, finish_reason: null }] })}\n\n`;
        res.write(chunk({ role: "assistant", content: "" }));
        for (const word of words) res.write(chunk({ content: word }));
        res.end(
          `data: ${JSON.stringify({ error: { message: "engine overloaded", type: "InternalServerError", code: 500 } })}\n\ndata: [DONE]\n\n`,
        );
      },
    });
    closers.push(() => failing.close());
    const [healthy] = await simEngines(1);
    const { gw, lines } = await gatewayFor([failing, healthy!]);
    // A session whose turns the scripted engine (e1) serves first.
    let session = "";
    for (let i = 0; session === "" && i < 64; i++) {
      const probe = await fetch(`${gw.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-session-id": `s${i}` },
        body: JSON.stringify({ ...CHAT, stream: false, max_tokens: 1 }),
      });
      await probe.text();
      if (probe.headers.get("x-agent-serve-backend") === "e1") session = `s${i}`;
    }
    const answer = await post(gw.url, CHAT, { "x-session-id": session });
    const events = dataEvents(answer.text);
    expect(events.some((e) => typeof e === "object" && e !== null && "error" in e)).toBe(false);
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.filter(
      (e): e is { id: string; choices: { delta: { content?: string } }[] } =>
        typeof e === "object" && e !== null && "choices" in e,
    );
    expect(new Set(chunks.map((c) => c.id))).toEqual(new Set(["chatcmpl-first"]));
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    expect(text.startsWith(words.join(""))).toBe(true);
    expect(text.length).toBeGreaterThan(words.join("").length);
    const line = requestLine(lines);
    expect(line).toMatchObject({ status: 200, backend: "e2", migrated: "continued from e1" });
    expect(line["error"]).toBeUndefined();
  });
});
