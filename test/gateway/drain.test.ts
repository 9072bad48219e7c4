// Drain, don't cut: an engine removed by a reload takes no new requests, its streams in flight finish (up to
// upstream.drain_seconds, on an injected clock), then its connections close; the log says which happened.
import type { ServerResponse } from "node:http";
import { Writable } from "node:stream";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load.js";
import { ManualClock, ManualTimers } from "../../src/core/clock.js";
import {
  answerOk,
  startGatewayFor,
  startScriptedEngine,
  type ScriptedEngine,
  type TestGateway,
} from "../helpers/faulty-engine.js";

const DRAIN_SECONDS = 30;

function chunk(content: string): string {
  const event = {
    id: "c1",
    object: "chat.completion.chunk",
    model: "m",
    choices: [{ index: 0, delta: { content } }],
  };
  return `data: ${JSON.stringify(event)}\n\n`;
}

/** An engine that opens each stream with one chunk and finishes it only when the test says so. */
async function slowStreamEngine(): Promise<{ engine: ScriptedEngine; open: ServerResponse[] }> {
  const open: ServerResponse[] = [];
  const engine = await startScriptedEngine({
    completion: ({ res }) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(chunk("first "));
      open.push(res);
    },
  });
  return { engine, open };
}

function finish(res: ServerResponse): void {
  res.end(chunk("last") + "data: [DONE]\n\n");
}

/** The log lines the gateway writes, parsed. */
function captureLog(): { logger: pino.Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(data: Buffer, _encoding, done) {
      for (const line of data.toString("utf8").split("\n"))
        if (line !== "") lines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  return { logger: pino({ level: "info" }, sink), lines };
}

/** Opens a stream and resolves once its first bytes arrived; `rest` reads it to its end. */
async function openStream(
  url: string,
  session: string,
): Promise<{ backend: string | null; rest: Promise<string> }> {
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-session-id": session },
    body: JSON.stringify({ model: "m", stream: true, messages: [{ role: "user", content: "hi" }] }),
  });
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = decoder.decode((await reader.read()).value);
  const rest = (async () => {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return text;
      text += decoder.decode(value, { stream: true });
    }
  })();
  return { backend: response.headers.get("x-agent-serve-backend"), rest };
}

describe("draining removed engines", () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  async function setup() {
    const leaving = await slowStreamEngine();
    const staying = await startScriptedEngine({ completion: ({ res }) => answerOk(res) });
    closers.push(
      () => leaving.engine.close(),
      () => staying.close(),
    );
    const clock = new ManualClock(1_000_000);
    const timers = new ManualTimers(clock);
    const { logger, lines } = captureLog();
    const engines = [
      { id: "leaving", url: leaving.engine.url },
      { id: "staying", url: staying.url },
    ];
    const overrides = {
      // Probes never run on these timers unless told: the backends stay up as configured.
      health: { probe_interval_seconds: 3600, engine_metrics_interval_seconds: 0 },
      upstream: { drain_seconds: DRAIN_SECONDS },
    };
    const gw: TestGateway = await startGatewayFor(engines, overrides, { clock, timers, logger });
    closers.push(() => gw.close());
    const { registry, scheduler } = gw.gateway.runtime;
    let session = "";
    for (let i = 0; session === ""; i++)
      if (scheduler.ranking(`drain-${i}`, registry.tier("small"))[0]!.id === "leaving")
        session = `drain-${i}`;
    const removeLeaving = () =>
      gw.gateway.reload(
        parseConfig(
          {
            ...overrides,
            server: { host: "127.0.0.1", port: 0 },
            backends: [{ id: "staying", tier: "small", base_url: staying.url, model: "m" }],
          },
          "test",
        ),
      );
    return { leaving, staying, gw, timers, lines, session, removeLeaving };
  }

  it("lets a stream in flight finish on a removed engine while new requests go elsewhere", async () => {
    const { leaving, staying, gw, lines, session, removeLeaving } = await setup();
    const stream = await openStream(gw.url, session);
    expect(stream.backend).toBe("leaving");

    const { changed } = removeLeaving();
    expect(changed.join("\n")).toContain("removed backend leaving");
    expect(changed.join("\n")).toContain("1 requests in flight drain for up to 30 s");
    expect(
      lines.some((l) => l["msg"] === "backend draining: its requests in flight finish, it takes no new ones"),
    ).toBe(true);

    // The session's next turn goes to the engine that stays; the removed one gets no new request.
    const next = await fetch(`${gw.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-session-id": session },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "again" }] }),
    });
    expect(next.status).toBe(200);
    expect(next.headers.get("x-agent-serve-backend")).toBe("staying");
    expect(staying.completions).toBe(1);
    expect(leaving.engine.completions).toBe(1);

    // The removed engine finishes its stream: the client gets all of it, no error event.
    const closed = leaving.engine.nextClose();
    finish(leaving.open[0]!);
    const text = await stream.rest;
    expect(text).toContain("first ");
    expect(text).toContain("last");
    expect(text).toContain("data: [DONE]");
    expect(text).not.toContain('"error"');
    await closed; // and then its connections close
    expect(
      lines.some((l) => l["msg"] === "backend drained: its last request finished, connections closed"),
    ).toBe(true);
  });

  it("closes a removed engine at the drain bound, saying what it cut", async () => {
    const { leaving, gw, timers, lines, session, removeLeaving } = await setup();
    const stream = await openStream(gw.url, session);
    removeLeaving();
    const closed = leaving.engine.nextClose();
    timers.advance(DRAIN_SECONDS * 1000 - 1);
    expect(lines.some((l) => String(l["msg"]).startsWith("backend drain bound reached"))).toBe(false);
    timers.advance(1);
    const bound = lines.find((l) => String(l["msg"]).startsWith("backend drain bound reached"));
    expect(bound).toMatchObject({ backend: "leaving", cut: 1, drainSeconds: DRAIN_SECONDS });
    await closed;
    // The client's stream ends (how it ends is the stream relay's: an error event, or a continuation).
    expect(await stream.rest).toContain("first ");
  });
});
