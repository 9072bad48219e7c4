// The Responses API routes vLLM serves: POST /v1/responses, GET /v1/responses/{id}, POST /v1/responses/{id}/cancel.
//
// vLLM has no DELETE /v1/responses/{id}; that method on that path gets FastAPI's 405, as from vLLM.
import type { IncomingMessage, ServerResponse } from "node:http";
import { writeJson } from "../core/write-json.js";
import { renderChat, type ChatMessage } from "./chat-template.js";
import { SIM_DEFAULTS } from "./defaults.js";
import type { EngineLoop } from "./engine-loop.js";
import { checkServedModel, sendRouteError, SimRequestError } from "../surface/errors.js";
import type { ResponseHost } from "./generation-response.js";
import { readJsonBody, requestSessionId } from "../surface/http-body.js";
import type { SimProfile } from "./profiles.js";
import { planChatReply } from "./reply-plan.js";
import { createEngineRequest } from "./request-factory.js";
import type { ResponseStore } from "./response-store.js";
import { parseResponsesRequest } from "./responses-request.js";
import { hexId, ResponsesResponse } from "./responses-response.js";
import type { SimScript } from "./script.js";
import type { ToolCallRates } from "./tool-calls.js";
import type { ToolTypeSupport } from "./responses-tools.js";

export interface ResponsesApiDeps {
  model: string;
  profile: SimProfile;
  maxModelLen: number;
  seed: number;
  loop: EngineLoop;
  toolCallRates: ToolCallRates;
  toolTypes: ToolTypeSupport;
  /** Scripted mode's script, if any. */
  script?: SimScript | undefined;
  store: ResponseStore;
  host: ResponseHost;
  nowSeconds(): number;
}

/** vLLM's 404 for a response id it does not hold. */
function notFound(id: string): SimRequestError {
  return new SimRequestError(`Response with id '${id}' not found.`, 404, "NotFoundError", "response_id");
}

export class ResponsesApi {
  constructor(private readonly deps: ResponsesApiDeps) {}

  /** Whether `path` is one of this API's routes. */
  static owns(path: string): boolean {
    return path === "/v1/responses" || path.startsWith("/v1/responses/");
  }

  /** Answers a request on one of its routes; rejections come back through the promise. */
  async handle(path: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const method = req.method ?? "";
    if (path === "/v1/responses") {
      if (method !== "POST") return sendRouteError(res, 405);
      return this.create(req, res);
    }
    const rest = path.slice("/v1/responses/".length);
    const parts = rest.split("/");
    const id = decodeURIComponent(parts[0] ?? "");
    if (id.length === 0 || parts.length > 2 || (parts.length === 2 && parts[1] !== "cancel")) {
      return sendRouteError(res, 404);
    }
    if (parts.length === 2) {
      if (method !== "POST") return sendRouteError(res, 405);
      // vLLM cancels only background responses, which this engine does not run: a stored one is synchronous.
      if (!this.deps.store.get(id)) throw notFound(id);
      throw new SimRequestError(
        "Cannot cancel a synchronous response.",
        400,
        "BadRequestError",
        "response_id",
      );
    }
    if (method !== "GET") return sendRouteError(res, 405);
    const stored = this.deps.store.get(id);
    if (!stored) throw notFound(id);
    writeJson(res, 200, stored.body);
  }

  private async create(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const body = await readJsonBody(req, SIM_DEFAULTS.maxRequestBodyBytes);
    const request = parseResponsesRequest(body, this.deps.toolTypes);
    const sessionId = requestSessionId(req.headers, body);
    checkServedModel(request.model, this.deps.model);
    let history: readonly ChatMessage[] = [];
    if (request.previousResponseId !== undefined) {
      const previous = this.deps.store.get(request.previousResponseId);
      if (!previous) throw notFound(request.previousResponseId);
      history = previous.history;
    }
    // Instructions are this request's own (OpenAI's rule: they do not carry over from the previous response).
    const messages: ChatMessage[] = [
      ...(request.instructions !== null ? [{ role: "system" as const, content: request.instructions }] : []),
      ...history,
      ...request.input,
    ];
    const offerTools = request.toolChoice !== "none" && request.chatTools.length > 0;
    const promptTokenIds = renderChat(messages, { tools: offerTools ? request.chatTools : undefined });
    const limit = this.deps.maxModelLen;
    if (promptTokenIds.length >= limit) {
      throw new SimRequestError(
        `The engine prompt length ${promptTokenIds.length} exceeds the max_model_len ${limit}. Please reduce prompt.`,
        400,
        "BadRequestError",
        "input",
      );
    }
    const seed = request.seed ?? this.deps.seed;
    const script = planChatReply(
      {
        messages,
        toolFunctions: request.toolFunctions,
        toolChoice: request.toolChoice,
        parallelToolCalls: request.parallelToolCalls,
        outputFormat: request.outputFormat,
      },
      this.deps.toolCallRates,
      { promptTokenIds, seed, choiceIndex: 0 },
      this.deps.script,
    );
    const id = hexId("resp");
    const engineRequest = createEngineRequest({
      id,
      promptTokenIds,
      maxTokens: request.maxOutputTokens,
      maxModelLen: limit,
      stop: this.deps.profile.stop,
      seed,
      choiceIndex: 0,
      cacheSalt: request.cacheSalt,
      sessionId,
      ignoreEos: request.ignoreEos,
      scriptedText: script?.text,
    });
    const response = new ResponsesResponse({
      res,
      host: this.deps.host,
      frame: {
        id,
        createdAt: this.deps.nowSeconds(),
        model: this.deps.model,
        maxOutputTokens: request.maxOutputTokens ?? limit - promptTokenIds.length,
      },
      request,
      engineRequest,
      toolPlan: script?.toolPlan,
      promptTokens: promptTokenIds.length,
      history: [...history],
      store: this.deps.store,
    });
    this.deps.loop.submit(engineRequest, response);
  }
}
