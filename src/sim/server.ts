// The simulated engine's HTTP surface: vLLM's OpenAI-compatible routes, /metrics, /health and fault control.
import { writeJson } from "../core/write-json.js";
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { systemClock } from "../core/clock.js";
import type { Random } from "../core/random.js";
import { renderChat } from "./chat-template.js";
import { ResponseStore } from "./response-store.js";
import { ResponsesApi } from "./responses-routes.js";
import { SIM_DEFAULTS } from "./defaults.js";
import type { EngineLoop } from "./engine-loop.js";
import {
  checkServedModel,
  errorTypeForStatus,
  sendError,
  sendRouteError,
  SimRequestError,
} from "../surface/errors.js";
import { HEALTHY, parseFault, shouldInjectError, type SimFault } from "./faults.js";
import { GenerationResponse, type ResponseHost, type ResponseOutcome } from "./generation-response.js";
import { readJsonBody, requestSessionId } from "../surface/http-body.js";
import type { SimMetrics } from "./metrics.js";
import { answerInfoRoute, type InfoSource } from "../surface/info-routes.js";
import { parseMessagesRequest, promptTools, type SystemMessagesMode } from "../surface/messages-request.js";
import { MessagesResponse } from "./messages-response.js";
import { sendAnthropicError } from "../surface/messages-shapes.js";
import type { Usage } from "../surface/openai-shapes.js";
import type { SimProfile } from "./profiles.js";
import { planChatReply } from "./reply-plan.js";
import { chatPrompt } from "./continued-prompt.js";
import { createEngineRequest } from "./request-factory.js";
import { parseChatRequest, parseCompletionRequest, type GenerateRequest } from "../surface/request-parser.js";
import type { EngineRequest } from "./request.js";
import type { SimScript } from "./script.js";
import type { ToolCallPlan, ToolCallRates } from "./tool-calls.js";
import { encode } from "./tokenizer.js";
import type { ToolTypeSupport } from "./responses-tools.js";
import { ChangeSignal } from "../core/change-signal.js";
import { zeroCounters, type ServerCounters } from "../surface/counters.js";
import { INFO_ROUTES, OPENAI_ROUTES, routeTable } from "../surface/routes.js";

export interface SimServerDeps {
  model: string;
  profile: SimProfile;
  maxModelLen: number;
  seed: number;
  loop: EngineLoop;
  metrics: SimMetrics;
  /** Dice for error_rate faults. */
  random: Random;
  /** How often tool calls happen when a request offers tools. */
  toolCallRates: ToolCallRates;
  /** Whose Responses tool handling to follow (default vLLM's; "gpt-oss": its harmony path's). */
  toolTypes?: ToolTypeSupport;
  /** What a system message inside a Messages request's `messages` gets (default "render", as vLLM 0.25.1). */
  systemMessages?: SystemMessagesMode;
  /** Scripted mode's script, if any. */
  script?: SimScript;
  /** Called once the engine has died from a `die` fault (the CLI exits the process here). */
  onDie?: () => void;
  /** Where KV events are published (GET /sim/kv-events announces it); undefined when they are off. */
  kvEvents?: () => unknown;
  /** vLLM's POST /reset_prefix_cache: false while blocks are in use. */
  resetPrefixCache?: () => boolean;
}

const ROUTES = routeTable(INFO_ROUTES, OPENAI_ROUTES, [
  ["/sim/fault", ["GET", "POST"]],
  ["/sim/stats", ["GET"]],
  ["/sim/kv-events", ["GET"]],
  ["/reset_prefix_cache", ["POST"]],
]);

function nowSeconds(): number {
  return Math.floor(systemClock.nowMs() / 1000);
}

export class SimServer {
  private readonly info: InfoSource;
  private readonly http: Server;
  private readonly sockets = new Set<Socket>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private fault: SimFault = HEALTHY;
  private dead = false;
  private readonly closed: Promise<void>;
  private resolveClosed: () => void = () => undefined;
  readonly counters: ServerCounters = zeroCounters();
  /** Told when a counter or the engine's work changes (a request received, aborted or done): tests wait on it. */
  readonly changes = new ChangeSignal();
  private readonly responses: ResponsesApi;

  /** Handed to every response: how it reads the fault, cancels its engine work and reports its outcome. */
  private readonly responseHost: ResponseHost = {
    currentFault: () => this.fault,
    abort: (requests) => {
      for (const request of requests) this.deps.loop.abort(request.id);
      this.changes.notify();
    },
    recordOutcome: (outcome, totals) => this.record(outcome, totals),
  };

  constructor(private readonly deps: SimServerDeps) {
    this.info = {
      version: SIM_DEFAULTS.version,
      model: deps.model,
      maxModelLen: deps.maxModelLen,
      metrics: deps.metrics,
      nowSeconds,
    };
    this.responses = new ResponsesApi({
      model: deps.model,
      profile: deps.profile,
      maxModelLen: deps.maxModelLen,
      seed: deps.seed,
      loop: deps.loop,
      toolCallRates: deps.toolCallRates,
      toolTypes: deps.toolTypes ?? "vllm",
      store: new ResponseStore(SIM_DEFAULTS.responseStoreCapacity),
      script: deps.script,
      host: this.responseHost,
      nowSeconds,
    });
    this.http = createServer({ keepAlive: true, noDelay: true }, (req, res) => {
      try {
        this.route(req, res);
      } catch (err) {
        // Never let one bad request take the whole engine down.
        this.fail(res, err);
      }
    });
    this.http.keepAliveTimeout = SIM_DEFAULTS.keepAliveTimeoutMs;
    this.http.headersTimeout = SIM_DEFAULTS.headersTimeoutMs;
    this.http.on("connection", (socket: Socket) => {
      this.sockets.add(socket);
      socket.on("close", () => this.sockets.delete(socket));
    });
    this.closed = new Promise((resolve) => {
      this.resolveClosed = resolve;
    });
    this.http.once("close", () => this.resolveClosed());
  }

  listen(host: string, port: number): Promise<number> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error): void => reject(err);
      this.http.once("error", onError);
      this.http.listen(port, host, () => {
        this.http.off("error", onError);
        const bound = (this.http.address() as AddressInfo).port;
        // Closed (or killed) while binding: give the port straight back.
        if (this.dead) this.http.close();
        resolve(bound);
      });
    });
  }

  get currentFault(): SimFault {
    return this.fault;
  }

  setFault(fault: SimFault): void {
    if (this.dead) return;
    this.fault = fault;
    if (fault.kind === "die") this.die();
  }

  /** Stops listening, drops every connection and aborts all engine work. */
  close(): Promise<void> {
    if (!this.dead) this.shutdown();
    return this.closed;
  }

  private die(): void {
    if (this.dead) return;
    this.shutdown();
    this.deps.onDie?.();
  }

  private shutdown(): void {
    this.dead = true;
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    if (this.http.listening) this.http.close();
    else this.resolveClosed();
    this.deps.loop.stop();
    for (const socket of this.sockets) socket.destroy();
  }

  private route(req: IncomingMessage, res: ServerResponse): void {
    const url = req.url ?? "/";
    const query = url.indexOf("?");
    const path = query < 0 ? url : url.slice(0, query);
    if (path === "/v1/messages" || path === "/v1/messages/count_tokens") {
      if (this.fault.kind === "hang") return;
      if (req.method !== "POST") return sendRouteError(res, 405);
      this.handleMessages(path, req, res).catch((err: unknown) => this.failAnthropic(res, err));
      return;
    }
    if (ResponsesApi.owns(path)) {
      if (this.fault.kind === "hang") return;
      this.handleResponses(path, req, res).catch((err: unknown) => this.fail(res, err));
      return;
    }
    const methods = ROUTES.get(path);
    if (!methods) return sendRouteError(res, 404);
    if (!methods.includes(req.method ?? "")) return sendRouteError(res, 405);
    if (path.startsWith("/sim/")) {
      this.handleControl(path, req, res).catch((err: unknown) => this.fail(res, err));
      return;
    }
    // A hung engine accepts connections and requests but answers nothing.
    if (this.fault.kind === "hang") return;
    const fail = (err: unknown): void => this.fail(res, err);
    if (answerInfoRoute(path, res, this.info, fail)) return;
    if (path === "/reset_prefix_cache") {
      if (this.deps.resetPrefixCache?.() ?? false) {
        res.writeHead(200, { "content-length": 0 });
        res.end();
      } else
        fail(
          new SimRequestError(
            "Failed to reset the prefix cache: blocks are in use",
            503,
            "ServiceUnavailableError",
          ),
        );
      return;
    }
    switch (path) {
      case "/v1/chat/completions":
        this.handleGenerate(req, res, "chat").catch((err: unknown) => this.fail(res, err));
        return;
      default:
        this.handleGenerate(req, res, "completion").catch((err: unknown) => this.fail(res, err));
    }
  }

  private fail(res: ServerResponse, err: unknown): void {
    if (err instanceof SimRequestError) {
      if (err.status >= 500) this.counters.requestsFailed += 1;
      else this.counters.requestsRejected += 1;
      sendError(res, err);
      return;
    }
    this.counters.requestsFailed += 1;
    const message = err instanceof Error ? err.message : String(err);
    sendError(res, new SimRequestError(`Internal server error: ${message}`, 500, "InternalServerError"));
  }

  private async handleControl(path: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (path === "/sim/stats") return writeJson(res, 200, this.counters);
    if (path === "/sim/kv-events") return writeJson(res, 200, this.deps.kvEvents?.() ?? { enabled: false });
    if (req.method === "GET") return writeJson(res, 200, this.fault);
    const body = await readJsonBody(req, SIM_DEFAULTS.maxRequestBodyBytes);
    let fault: SimFault;
    try {
      fault = parseFault(body);
    } catch (err) {
      throw new SimRequestError(
        err instanceof Error ? err.message : String(err),
        400,
        "BadRequestError",
        "kind",
      );
    }
    writeJson(res, 200, fault);
    // Answer first, then die, so the caller learns the fault took.
    if (fault.kind === "die") res.once("finish", () => setImmediate(() => this.setFault(fault)));
    else this.setFault(fault);
  }

  private async handleGenerate(
    req: IncomingMessage,
    res: ServerResponse,
    endpoint: "chat" | "completion",
  ): Promise<void> {
    this.counters.requestsReceived += 1;
    this.changes.notify();
    const body = await readJsonBody(req, SIM_DEFAULTS.maxRequestBodyBytes);
    const sessionId = requestSessionId(req.headers, body);
    const request: GenerateRequest =
      endpoint === "chat" ? parseChatRequest(body) : parseCompletionRequest(body);
    checkServedModel(request.model, this.deps.model);
    const prompts = this.tokenize(request);

    this.injectFaults();
    if (this.fault.kind === "slow") {
      await this.sleep(this.fault.extraLatencyMs);
      if (res.destroyed) this.counters.requestsAborted += 1;
    }
    if (this.fault.kind === "hang" || this.dead || res.destroyed) return;
    this.start(request, prompts, res, endpoint, sessionId);
  }

  /** The Anthropic Messages API, on the same engine path as chat: the request becomes chat turns. */
  private async handleMessages(path: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const countOnly = path.endsWith("/count_tokens");
    if (!countOnly) this.counters.requestsReceived += 1;
    this.changes.notify();
    const body = await readJsonBody(req, SIM_DEFAULTS.maxRequestBodyBytes);
    const request = parseMessagesRequest(body, countOnly, this.deps.systemMessages);
    checkServedModel(request.model, this.deps.model);
    // A trailing assistant message is a prefill (Anthropic's rule): the reply goes on from it.
    const prefilled = request.messages[request.messages.length - 1]?.role === "assistant";
    const prompt = chatPrompt(request.messages, promptTools(request), {
      addGenerationPrompt: !prefilled,
      continueFinalMessage: prefilled,
    });
    const promptTokenIds = prompt.promptTokenIds;
    if (countOnly) return writeJson(res, 200, { input_tokens: promptTokenIds.length });
    const limit = this.deps.maxModelLen;
    if (promptTokenIds.length + request.maxTokens > limit) {
      throw new SimRequestError(
        `This model's maximum context length is ${limit} tokens. However, you requested ` +
          `${promptTokenIds.length + request.maxTokens} tokens (${promptTokenIds.length} in the messages, ` +
          `${request.maxTokens} in the completion). Please reduce the length of the messages or completion.`,
      );
    }
    this.injectFaults();
    if (this.fault.kind === "slow") await this.sleep(this.fault.extraLatencyMs);
    if (this.fault.kind === "hang" || this.dead || res.destroyed) return;
    const seed = this.deps.seed;
    const script = planChatReply(
      {
        messages: prompt.planMessages,
        toolFunctions: request.toolFunctions,
        toolChoice: request.toolChoice,
        parallelToolCalls: true,
        outputFormat: { kind: "text" },
      },
      this.deps.toolCallRates,
      { promptTokenIds: prompt.seedPromptTokenIds, seed, choiceIndex: 0 },
      this.deps.script,
    );
    const engineRequest = createEngineRequest({
      continued: prefilled ? prompt : undefined,
      id: `msg-${randomUUID()}`,
      promptTokenIds,
      maxTokens: request.maxTokens,
      maxModelLen: limit,
      stop: this.deps.profile.stop,
      seed,
      choiceIndex: 0,
      cacheSalt: undefined,
      sessionId: requestSessionId(req.headers, body),
      ignoreEos: request.ignoreEos,
      scriptedText: script?.text,
    });
    const response = new MessagesResponse({
      res,
      host: this.responseHost,
      model: this.deps.model,
      stream: request.stream,
      engineRequest,
      toolPlan: script?.toolPlan,
      promptTokens: promptTokenIds.length,
    });
    this.deps.loop.submit(engineRequest, response);
    if (request.stream) response.sendHeadersSoon();
  }

  /** Errors of the Messages routes in Anthropic's envelope, as vLLM's Anthropic endpoint answers them. */
  private failAnthropic(res: ServerResponse, err: unknown): void {
    const error =
      err instanceof SimRequestError
        ? err
        : new SimRequestError(
            `Internal server error: ${err instanceof Error ? err.message : String(err)}`,
            500,
          );
    if (error.status >= 500) this.counters.requestsFailed += 1;
    else this.counters.requestsRejected += 1;
    sendAnthropicError(res, error);
  }

  /** The Responses API: creation counts as a generation request (and meets injected faults); reads do not. */
  private async handleResponses(path: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const creates = path === "/v1/responses" && req.method === "POST";
    if (creates) {
      this.counters.requestsReceived += 1;
      this.changes.notify();
      this.injectFaults();
      if (this.fault.kind === "slow") await this.sleep(this.fault.extraLatencyMs);
      if (this.dead || res.destroyed) return;
    }
    await this.responses.handle(path, req, res);
  }

  /** Throws the injected failure when an error_rate fault's dice say so. */
  private injectFaults(): void {
    if (!shouldInjectError(this.fault, this.deps.random)) return;
    const status =
      this.fault.kind === "error_rate" ? (this.fault.status ?? SIM_DEFAULTS.injectedErrorStatus) : 500;
    throw new SimRequestError(
      "Simulated engine failure (injected fault)",
      status,
      errorTypeForStatus(status),
    );
  }

  /** Prompt token ids per prompt, checked against the context window as vLLM checks them. */
  private tokenize(request: GenerateRequest): number[][] {
    const prompts =
      request.endpoint === "chat"
        ? [
            renderChat(request.messages, {
              tools: request.tools,
              addGenerationPrompt: request.addGenerationPrompt,
              continueFinalMessage: request.continueFinalMessage,
            }),
          ]
        : request.prompts.map((prompt) => (typeof prompt === "string" ? encode(prompt) : prompt));
    const limit = this.deps.maxModelLen;
    const where = request.endpoint === "chat" ? "messages" : "prompt";
    for (const prompt of prompts) {
      const promptTokens = prompt.length;
      if (request.maxTokens !== undefined && promptTokens + request.maxTokens > limit) {
        throw new SimRequestError(
          `This model's maximum context length is ${limit} tokens. However, you requested ` +
            `${promptTokens + request.maxTokens} tokens (${promptTokens} in the ${where}, ${request.maxTokens} ` +
            `in the completion). Please reduce the length of the ${where} or completion.`,
        );
      }
      if (promptTokens >= limit) {
        throw new SimRequestError(
          `This model's maximum context length is ${limit} tokens. However, your ${where} resulted in ` +
            `${promptTokens} tokens. Please reduce the length of the ${where}.`,
        );
      }
    }
    return prompts;
  }

  private start(
    request: GenerateRequest,
    prompts: number[][],
    res: ServerResponse,
    endpoint: "chat" | "completion",
    sessionId: string | undefined,
  ): void {
    const id = `${endpoint === "chat" ? "chatcmpl" : "cmpl"}-${randomUUID().replaceAll("-", "")}`;
    const choices: EngineRequest[] = [];
    const promptIndexOfChoice: number[] = [];
    const toolPlans: (ToolCallPlan | undefined)[] = [];
    const seed = request.seed ?? this.deps.seed;
    // A continued final message: the reply is the one the prompt without it gets, from where it stops.
    const continued =
      request.endpoint === "chat" && request.continueFinalMessage
        ? chatPrompt(request.messages, request.tools, {
            addGenerationPrompt: false,
            continueFinalMessage: true,
          })
        : undefined;
    prompts.forEach((promptTokenIds, promptIndex) => {
      for (let sample = 0; sample < request.n; sample++) {
        promptIndexOfChoice.push(promptIndex);
        const script =
          request.endpoint === "chat"
            ? planChatReply(
                continued === undefined ? request : { ...request, messages: continued.planMessages },
                this.deps.toolCallRates,
                {
                  promptTokenIds: continued?.seedPromptTokenIds ?? promptTokenIds,
                  seed,
                  choiceIndex: sample,
                },
                this.deps.script,
              )
            : undefined;
        toolPlans.push(script?.toolPlan);
        choices.push(
          createEngineRequest({
            id: `${id}-${choices.length}`,
            promptTokenIds,
            maxTokens: request.maxTokens,
            maxModelLen: this.deps.maxModelLen,
            stop: this.deps.profile.stop,
            seed,
            choiceIndex: sample,
            cacheSalt: request.cacheSalt,
            sessionId,
            ignoreEos: request.ignoreEos,
            scriptedText: script?.text,
            continued,
          }),
        );
      }
    });
    const loop = this.deps.loop;
    const response = new GenerationResponse({
      res,
      host: this.responseHost,
      endpoint,
      identity: { id, created: nowSeconds(), model: this.deps.model },
      stream: request.stream,
      includeUsage: request.includeUsage,
      choices,
      promptIndexOfChoice,
      promptTokens: prompts.reduce((sum, prompt) => sum + prompt.length, 0),
      toolPlans,
    });
    for (const choice of choices) loop.submit(choice, response);
    response.sendHeadersSoon();
  }

  private record(outcome: ResponseOutcome, totals: Usage | undefined): void {
    if (outcome === "aborted") this.counters.requestsAborted += 1;
    else if (outcome === "served") this.counters.requestsServed += 1;
    else this.counters.requestsFailed += 1;
    if (totals) {
      this.counters.promptTokens += totals.prompt_tokens;
      this.counters.cachedTokens += totals.prompt_tokens_details.cached_tokens;
      this.counters.completionTokens += totals.completion_tokens;
    }
    this.changes.notify();
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        resolve();
      }, ms);
      this.timers.add(timer);
    });
  }
}
