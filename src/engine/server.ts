// The real engine's HTTP surface: vLLM's OpenAI-compatible chat and text completions, the Anthropic Messages API,
// /v1/models, /metrics, /health.
//
// Request validation, error envelopes, response shapes and routes are the engine surface's (src/surface), which the
// simulator serves too and which follow vLLM: the gateway and its clients cannot tell the two engines apart by their
// answers, only by their timings.
import { zeroCounters, type ServerCounters } from "../surface/counters.js";
import { ANTHROPIC_ROUTES, INFO_ROUTES, OPENAI_ROUTES, routeTable } from "../surface/routes.js";
import { writeJson } from "../core/write-json.js";
import { ChangeSignal } from "../core/change-signal.js";
import { answerInfoRoute, type InfoSource } from "../surface/info-routes.js";
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { readJsonBody } from "../surface/http-body.js";
import { sendError, sendRouteError, SimRequestError } from "../surface/errors.js";
import {
  chatCompletionBody,
  completionBody,
  SSE_DONE,
  SseChunks,
  usage,
  type Usage,
} from "../surface/openai-shapes.js";
import { ENGINE_DEFAULTS } from "./defaults.js";
import type { FinishedGeneration, LlamaEngine } from "./llama-engine.js";
import { EngineMessagesAnswer } from "./messages-answer.js";
import { sendAnthropicError } from "../surface/messages-shapes.js";
import {
  parseEngineMessagesRequest,
  parseEngineRequest,
  type Endpoint,
  type GenerationRequest,
} from "./requests.js";
import type { EngineMetrics } from "./metrics.js";

/** What the server has seen, as the handle's stats() reports it: the same counters as the simulator's. */
export type EngineCounters = ServerCounters;

const ROUTES = routeTable(INFO_ROUTES, OPENAI_ROUTES, ANTHROPIC_ROUTES);

const nowSeconds = (): number => Math.floor(Date.now() / 1000);

/**
 * vLLM's return_token_ids on an answer of one choice: the reply's ids on the choice (`token_ids`), the prompt's
 * on the response for chat and on the choice for completions (`prompt_token_ids`), where vLLM puts them.
 */
function withTokenIds(body: unknown, chat: boolean, prompt: number[], reply: number[]): unknown {
  const answer = body as { choices: Record<string, unknown>[] };
  const choices = answer.choices.map((choice) =>
    chat ? { ...choice, token_ids: reply } : { ...choice, prompt_token_ids: prompt, token_ids: reply },
  );
  return chat ? { ...answer, choices, prompt_token_ids: prompt } : { ...answer, choices };
}

export class EngineServer {
  private readonly info: InfoSource;
  private readonly http: Server;
  private readonly sockets = new Set<Socket>();
  private readonly inflight = new Map<AbortController, Promise<unknown>>();
  private closing: Promise<void> | undefined;
  readonly counters: EngineCounters = zeroCounters();
  /** Told when a generation ends (served, aborted or failed): the counters changed. */
  readonly changes = new ChangeSignal();

  constructor(
    private readonly engine: LlamaEngine,
    private readonly metrics: EngineMetrics,
    private readonly servedModel: string,
  ) {
    this.info = {
      version: ENGINE_DEFAULTS.version,
      model: servedModel,
      maxModelLen: engine.shape.ctxSize,
      metrics,
      nowSeconds,
    };
    this.http = createServer({ keepAlive: true, noDelay: true }, (req, res) => this.route(req, res));
    this.http.keepAliveTimeout = ENGINE_DEFAULTS.keepAliveTimeoutMs;
    this.http.headersTimeout = ENGINE_DEFAULTS.headersTimeoutMs;
    this.http.on("connection", (socket: Socket) => {
      this.sockets.add(socket);
      socket.on("close", () => this.sockets.delete(socket));
    });
  }

  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      this.http.once("error", reject);
      this.http.listen(port, host, () => {
        this.http.off("error", reject);
        resolve((this.http.address() as AddressInfo).port);
      });
    });
  }

  /** Stops listening, drops connections, ends running generations and waits until their slots are free. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const closed = new Promise<void>((resolve) => this.http.close(() => resolve()));
      this.engine.stopWaiting();
      for (const controller of this.inflight.keys()) controller.abort();
      for (const socket of this.sockets) socket.destroy();
      await Promise.allSettled(this.inflight.values());
      await closed;
    })();
    return this.closing;
  }

  private route(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? "/";
    const query = url.indexOf("?");
    const path = query < 0 ? url : url.slice(0, query);
    const methods = ROUTES.get(path);
    if (!methods) return sendRouteError(res, 404);
    if (!methods.includes(req.method ?? "")) return sendRouteError(res, 405);
    if (answerInfoRoute(path, res, this.info, (err: unknown) => this.fail(res, err))) return;
    if (path.startsWith("/v1/messages")) {
      const countOnly = path.endsWith("/count_tokens");
      if (!countOnly) this.counters.requestsReceived += 1;
      this.handleMessages(req, res, countOnly).catch((err: unknown) => this.fail(res, err, true));
      return;
    }
    this.counters.requestsReceived += 1;
    const endpoint: Endpoint = path === "/v1/completions" ? "completion" : "chat";
    this.handleGenerate(req, res, endpoint).catch((err: unknown) => this.fail(res, err));
  }

  /** `anthropic`: the Messages routes answer errors in Anthropic's envelope, as vLLM's Anthropic endpoint does. */
  private fail(res: ServerResponse, err: unknown, anthropic = false): void {
    const error =
      err instanceof SimRequestError
        ? err
        : new SimRequestError(
            `Internal server error: ${err instanceof Error ? err.message : String(err)}`,
            500,
            "InternalServerError",
          );
    if (error.status >= 500) this.counters.requestsFailed += 1;
    else this.counters.requestsRejected += 1;
    if (res.headersSent) res.destroy();
    else if (anthropic) sendAnthropicError(res, error);
    else sendError(res, error);
  }

  private async handleGenerate(req: IncomingMessage, res: ServerResponse, endpoint: Endpoint): Promise<void> {
    const arrivedMs = performance.now();
    const body = await readJsonBody(req, ENGINE_DEFAULTS.maxRequestBodyBytes);
    const request = parseEngineRequest(body, endpoint, this.engine, this.servedModel);
    const chat = endpoint === "chat";
    const identity = {
      id: `${chat ? "chatcmpl" : "cmpl"}-${randomUUID().replaceAll("-", "")}`,
      created: nowSeconds(),
      model: this.servedModel,
    };
    const sse = request.stream ? new SseChunks(identity, endpoint, 1) : undefined;
    if (sse) {
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
      res.flushHeaders();
    }
    // A chat stream opens with the assistant's role, as vLLM sends it with the first token; a text stream does not.
    let opened = !chat;
    const result = await this.generate(res, request, arrivedMs, {
      onText: (text) => {
        if (!sse) return;
        if (!opened) res.write(sse.role(0));
        opened = true;
        res.write(sse.delta(0, text, null));
      },
    });
    if (!result) return;
    const totals: Usage = usage(result.promptTokens, result.completionTokens, result.cachedTokens);
    if (sse) {
      let tail = opened ? "" : sse.role(0);
      tail += sse.delta(0, "", result.finishReason);
      if (request.includeUsage) tail += sse.usage(totals);
      res.end(tail + SSE_DONE);
      return;
    }
    const choices = [{ index: 0, text: result.text, finishReason: result.finishReason }];
    const answer = chat
      ? chatCompletionBody(identity, choices, totals)
      : completionBody(identity, choices, totals);
    writeJson(
      res,
      200,
      request.returnTokenIds ? withTokenIds(answer, chat, request.prompt, result.tokens) : answer,
    );
  }

  /** The Anthropic Messages API on the chat path: the same generation, Anthropic's answer shapes. */
  private async handleMessages(req: IncomingMessage, res: ServerResponse, countOnly: boolean): Promise<void> {
    const arrivedMs = performance.now();
    const body = await readJsonBody(req, ENGINE_DEFAULTS.maxRequestBodyBytes);
    const request = parseEngineMessagesRequest(body, this.engine, this.servedModel, countOnly);
    if (countOnly) return writeJson(res, 200, { input_tokens: request.prompt.length });
    const answer = new EngineMessagesAnswer(res, this.servedModel, request.stream, request.prompt.length);
    const result = await this.generate(res, request, arrivedMs, {
      onFirstToken: (cachedTokens) => answer.firstToken(cachedTokens),
      onText: (text) => answer.text(text),
    });
    if (result) answer.finish(result);
  }

  /**
   * Runs one generation with the engine's metrics and counters; undefined when it was aborted (the client left,
   * or the engine is closing), the response then destroyed.
   */
  private async generate(
    res: ServerResponse,
    request: GenerationRequest,
    arrivedMs: number,
    hooks: { onFirstToken?: (cachedTokens: number) => void; onText: (text: string) => void },
  ): Promise<FinishedGeneration | undefined> {
    const { prompt } = request;
    const controller = new AbortController();
    res.on("close", () => controller.abort());
    const generation = this.engine.generate({
      prompt,
      maxTokens: request.maxTokens,
      sampling: request.sampling,
      ignoreEos: request.ignoreEos,
      signal: controller.signal,
      onFirstToken: (cachedTokens) => {
        this.metrics.observePrefill(
          { promptTokens: prompt.length, cachedTokens },
          (performance.now() - arrivedMs) / 1000,
        );
        hooks.onFirstToken?.(cachedTokens);
      },
      onText: hooks.onText,
    });
    this.inflight.set(controller, generation);
    try {
      const result = await generation;
      this.metrics.observeFinished(
        result.completionTokens,
        result.finishReason,
        (performance.now() - arrivedMs) / 1000,
      );
      if (result.finishReason === "abort") {
        this.counters.requestsAborted += 1;
        res.destroy();
        return undefined;
      }
      this.counters.requestsServed += 1;
      this.counters.promptTokens += result.promptTokens;
      this.counters.cachedTokens += result.cachedTokens;
      this.counters.completionTokens += result.completionTokens;
      return { ...result, finishReason: result.finishReason };
    } catch (err) {
      if (controller.signal.aborted) {
        this.counters.requestsAborted += 1; // withdrawn while it waited for a slot
        res.destroy();
        return undefined;
      }
      throw err;
    } finally {
      this.inflight.delete(controller);
      this.changes.notify();
    }
  }
}
