// Streams that end before the engine's usage (client cancel, engine cut) charge what was generated.
import { afterEach, describe, expect, it } from "vitest";
import { TokenBudgets } from "../../src/admission/token-budgets.js";
import { ResponsesRelay } from "../../src/gateway/responses-relay.js";
import { SseRelay } from "../../src/gateway/sse-relay.js";
import {
  post,
  startGatewayFor,
  startScriptedEngine,
  type CompletionCall,
  type TestGateway,
} from "../helpers/faulty-engine.js";
import { metricValue, scrape } from "../helpers/cluster.js";

const CONTENT = "hello there";
/** The gateway's prompt estimate for CONTENT (admit.ts): ceil(11 / 3) + 8 per message + 16. */
const PROMPT_ESTIMATE = 4 + 8 + 16;
const ASK = { model: "m", stream: true, messages: [{ role: "user", content: CONTENT }] };

function chunk(delta: Record<string, unknown>): string {
  return `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", choices: [{ index: 0, delta }] })}\n\n`;
}

/** The engine's usage chunk and [DONE]: the end of a whole stream. */
function usageThenDone(usage: Record<string, number>): string {
  return `data: ${JSON.stringify({ id: "c", choices: [], usage })}\n\ndata: [DONE]\n\n`;
}

/** Streams the role chunk and `tokens` one-token chunks, then does `end` (nothing: hold the stream open). */
function streamTokens(tokens: number, end: (call: CompletionCall) => void) {
  return (call: CompletionCall): void => {
    call.res.writeHead(200, { "content-type": "text/event-stream" });
    call.res.write(chunk({ role: "assistant", content: "" }));
    for (let i = 0; i < tokens; i++) call.res.write(chunk({ content: `t${i} ` }));
    end(call);
  };
}

/** Resolves after the gateway settled the next budget hold (the charge is then final). */
function nextSettle(gw: TestGateway): Promise<void> {
  const budgets = gw.gateway.runtime.budgets as TokenBudgets;
  const settle = budgets.settle.bind(budgets);
  return new Promise((resolve) => {
    budgets.settle = (...args) => {
      settle(...args);
      budgets.settle = settle;
      resolve();
    };
  });
}

/** Streams ASK with `headers`, reads until `marker` arrives, then hangs up. */
async function streamThenLeave(
  gw: TestGateway,
  headers: Record<string, string>,
  marker: string,
): Promise<void> {
  const controller = new AbortController();
  const response = await fetch(`${gw.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(ASK),
    signal: controller.signal,
  });
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  let text = "";
  while (!text.includes(marker)) text += new TextDecoder().decode((await reader.read()).value);
  controller.abort();
}

function usedBy(gw: TestGateway, agent: string): number {
  const budgets = gw.gateway.runtime.budgets as TokenBudgets;
  expect(budgets.reserved(agent)).toBe(0);
  return budgets.used(agent, gw.gateway.runtime.clock.nowMs());
}

describe("charges of streams that end early", () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });

  async function gatewayFor(completion: (call: CompletionCall) => void): Promise<TestGateway> {
    const engine = await startScriptedEngine({ completion });
    closers.push(() => engine.close());
    const gw = await startGatewayFor([{ id: "only", url: engine.url }], {
      admission: { default_token_budget: 100_000 },
    });
    closers.push(() => gw.close());
    return gw;
  }

  it("a stream the client cancels after 10 tokens charges the prompt and the tokens relayed", async () => {
    const gw = await gatewayFor(streamTokens(10, () => undefined));
    const settled = nextSettle(gw);
    await streamThenLeave(gw, { "x-agent-id": "canceller" }, "t9 ");
    await settled;
    // The role chunk counts as one: vLLM sends it with the first token.
    expect(usedBy(gw, "canceller")).toBe(PROMPT_ESTIMATE + 11);
  });

  it("a stream the engine cuts after 5 tokens charges what it relayed", async () => {
    const gw = await gatewayFor(streamTokens(5, ({ res, socket }) => res.write("", () => socket.destroy())));
    const settled = nextSettle(gw);
    const answer = await post(gw.url, ASK, { "x-agent-id": "cut" });
    expect(answer.status).toBe(200);
    expect(answer.text).toContain('"code":"upstream_error"');
    await settled;
    expect(usedBy(gw, "cut")).toBe(PROMPT_ESTIMATE + 6);
  });

  it("a stream that ends with the engine's usage is charged that usage, not the estimate", async () => {
    const usage = { prompt_tokens: 50, completion_tokens: 3, total_tokens: 53 };
    const gw = await gatewayFor(streamTokens(3, ({ res }) => res.end(usageThenDone(usage))));
    const settled = nextSettle(gw);
    const answer = await post(gw.url, ASK, { "x-agent-id": "whole" });
    expect(answer.status).toBe(200);
    await settled;
    expect(usedBy(gw, "whole")).toBe(53);
  });

  it("a client that leaves after the end event, before the engine closes its stream, is charged the usage", async () => {
    // Codex reads response.completed and hangs up: the answer was whole, so its usage (and receipt) stand.
    const usage = { prompt_tokens: 40, completion_tokens: 3, total_tokens: 43 };
    // the engine does not close its stream after [DONE]
    const gw = await gatewayFor(streamTokens(3, ({ res }) => res.write(usageThenDone(usage))));
    const settled = nextSettle(gw);
    await streamThenLeave(gw, { "x-agent-id": "leaver", "x-session-id": "leaver" }, "[DONE]");
    await settled;
    expect(usedBy(gw, "leaver")).toBe(43);
    // counted as an answered turn: the engine's prompt tokens, and the receipt (a new session's)
    const metrics = await scrape(gw.url);
    expect(metricValue(metrics, "agentserve_tokens_total", { tier: "small", kind: "prompt" })).toBe(40);
    const receipt = { tier: "small", kind: "lost", cause: "new_session" };
    expect(metricValue(metrics, "agentserve_prefix_tokens_total", receipt)).toBe(0);
  });

  it("relays count generation events across split reads, without usage chunks and [DONE]", () => {
    const sse = new SseRelay(Buffer.from(',"x_agent_serve":{}'), true);
    const text =
      chunk({ role: "assistant", content: "" }) +
      chunk({ content: "a" }) +
      chunk({ content: "b" }) +
      `data: ${JSON.stringify({ id: "c", choices: [], usage: { prompt_tokens: 1, completion_tokens: 2 } })}\n\n` +
      "data: [DONE]\n\n";
    const bytes = Buffer.from(text);
    for (let at = 0; at < bytes.length; at += 7) sse.push(bytes.subarray(at, at + 7));
    expect(sse.generatedEvents).toBe(3);
    const responses = new ResponsesRelay(Buffer.from(',"x_agent_serve":{}'));
    const event = (type: string, data: Record<string, unknown>): string =>
      `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
    responses.push(
      Buffer.from(
        event("response.created", { response: { id: "resp_1" } }) +
          event("response.output_text.delta", { delta: 'say ".delta"' }) +
          event("response.output_text.delta", { delta: "b" }) +
          event("response.function_call_arguments.delta", { delta: "{" }),
      ),
    );
    expect(responses.generatedEvents).toBe(3);
  });
});
