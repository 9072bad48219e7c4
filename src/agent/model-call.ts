// One model call of an agent through the official openai SDK: streamed, timed, with the gateway's routing facts.
import type OpenAI from "openai";
import type {
  ChatCompletionChunk,
  ChatCompletionFunctionTool,
  ChatCompletionMessageParam,
} from "openai/resources/chat/completions";

export interface ToolCallRequest {
  id: string;
  name: string;
  arguments: string;
}

export interface ModelRequest {
  messages: ChatCompletionMessageParam[];
  tools: ChatCompletionFunctionTool[];
  /** "none" on the last step of a turn: the model must answer in text. */
  toolChoice: "auto" | "none";
}

/** What one call returned and how the gateway placed it. */
export interface ModelStep {
  content: string;
  toolCalls: ToolCallRequest[];
  finishReason: string | null;
  status: number;
  error?: string;
  backend: string | null;
  tier: string | null;
  affinityHit: boolean | null;
  reason: string | null;
  /** Wall ms from sending to the first chunk with content or a tool call. */
  ttftMs: number | null;
  e2eMs: number;
  promptTokens: number;
  cachedTokens: number;
  completionTokens: number;
}

/** The model an agent talks to: the gateway in the product, a scripted fake in unit tests. */
export type ChatModel = (request: ModelRequest) => Promise<ModelStep>;

export interface GatewayModelOptions {
  client: OpenAI;
  model: string;
  maxTokens: number;
  nowMs: () => number;
}

/** The gateway's extra member; it may ride on any chunk (today a final `choices: []` one). */
interface RoutingMeta {
  backend_id?: string;
  tier?: string;
  affinity_hit?: boolean;
  reason?: string;
}

function headerFlag(value: string | null): boolean | null {
  return value === "true" ? true : value === "false" ? false : null;
}

export function gatewayModel(options: GatewayModelOptions): ChatModel {
  const { client, nowMs } = options;
  return async (request) => {
    const started = nowMs();
    const step: ModelStep = {
      content: "",
      toolCalls: [],
      finishReason: null,
      status: 0,
      backend: null,
      tier: null,
      affinityHit: null,
      reason: null,
      ttftMs: null,
      e2eMs: 0,
      promptTokens: 0,
      cachedTokens: 0,
      completionTokens: 0,
    };
    try {
      const { data: stream, response } = await client.chat.completions
        .create({
          model: options.model,
          messages: request.messages,
          // The API refuses an empty tools list, and tool_choice without tools.
          ...(request.tools.length > 0 ? { tools: request.tools, tool_choice: request.toolChoice } : {}),
          max_tokens: options.maxTokens,
          stream: true,
          stream_options: { include_usage: true },
        })
        .withResponse();
      step.status = response.status;
      // The headers are the stable place for routing facts; the body's x_agent_serve adds the reason.
      step.backend = response.headers.get("x-agent-serve-backend");
      step.tier = response.headers.get("x-agent-serve-tier");
      step.affinityHit = headerFlag(response.headers.get("x-agent-serve-affinity-hit"));
      step.reason = response.headers.get("x-agent-serve-reason");
      const calls = new Map<number, ToolCallRequest>();
      for await (const chunk of stream) {
        readChunk(chunk, step, calls, () => {
          step.ttftMs ??= nowMs() - started;
        });
      }
      step.toolCalls = [...calls.entries()].sort(([a], [b]) => a - b).map(([, call]) => call);
    } catch (err) {
      const status = (err as { status?: unknown }).status;
      if (typeof status === "number") step.status = status;
      step.error = err instanceof Error ? err.message : String(err);
    }
    step.e2eMs = nowMs() - started;
    return step;
  };
}

function readChunk(
  chunk: ChatCompletionChunk,
  step: ModelStep,
  calls: Map<number, ToolCallRequest>,
  firstToken: () => void,
): void {
  const meta = (chunk as ChatCompletionChunk & { x_agent_serve?: RoutingMeta }).x_agent_serve;
  if (meta !== undefined) {
    step.backend ??= meta.backend_id ?? null;
    step.tier ??= meta.tier ?? null;
    step.affinityHit ??= meta.affinity_hit ?? null;
    step.reason ??= meta.reason ?? null;
  }
  if (chunk.usage) {
    step.promptTokens = chunk.usage.prompt_tokens;
    step.completionTokens = chunk.usage.completion_tokens;
    step.cachedTokens = chunk.usage.prompt_tokens_details?.cached_tokens ?? 0;
  }
  const choice = chunk.choices[0];
  if (choice === undefined) return;
  if (choice.finish_reason) step.finishReason = choice.finish_reason;
  const delta = choice.delta;
  if (delta.content) {
    firstToken();
    step.content += delta.content;
  }
  for (const part of delta.tool_calls ?? []) {
    firstToken();
    const call = calls.get(part.index) ?? { id: "", name: "", arguments: "" };
    if (part.id) call.id = part.id;
    if (part.function?.name) call.name += part.function.name;
    if (part.function?.arguments) call.arguments += part.function.arguments;
    calls.set(part.index, call);
  }
}
