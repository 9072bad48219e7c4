// Response bodies and SSE chunks in the exact shapes vLLM's OpenAI-compatible server emits.
//
// Streaming chunks are assembled from a per-response prefix string rather than JSON.stringify of a fresh object:
// the SSE path runs once per token per client, and this keeps it cheap.

import type { PlannedCall, StreamDelta } from "./tool-requests.js";

export type FinishReasonOut = "stop" | "length" | "abort" | "tool_calls";

export interface Usage {
  prompt_tokens: number;
  total_tokens: number;
  completion_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

export function usage(promptTokens: number, completionTokens: number, cachedTokens: number): Usage {
  return {
    prompt_tokens: promptTokens,
    total_tokens: promptTokens + completionTokens,
    completion_tokens: completionTokens,
    prompt_tokens_details: { cached_tokens: cachedTokens },
  };
}

export interface ResponseIdentity {
  id: string;
  created: number;
  model: string;
}

export function modelList(
  model: string,
  maxModelLen: number,
  created: number,
  permissionId: string,
): unknown {
  return {
    object: "list",
    data: [
      {
        id: model,
        object: "model",
        created,
        owned_by: "vllm",
        root: model,
        parent: null,
        max_model_len: maxModelLen,
        permission: [
          {
            id: permissionId,
            object: "model_permission",
            created,
            allow_create_engine: false,
            allow_sampling: true,
            allow_logprobs: true,
            allow_search_indices: false,
            allow_view: true,
            allow_fine_tuning: false,
            organization: "*",
            group: null,
            is_blocking: false,
          },
        ],
      },
    ],
  };
}

export interface ChoiceResult {
  index: number;
  /** The message content (null when a tool call left no text before it). */
  text: string | null;
  finishReason: FinishReasonOut;
  toolCalls?: readonly PlannedCall[];
}

/** A message's tool calls in vLLM's ToolCall shape. */
function toolCallsBody(calls: readonly PlannedCall[] | undefined): unknown[] {
  return (calls ?? []).map((call) => ({
    id: call.id,
    type: "function",
    function: { name: call.name, arguments: call.arguments },
  }));
}

export function chatCompletionBody(
  identity: ResponseIdentity,
  choices: ChoiceResult[],
  totals: Usage,
): unknown {
  return {
    id: identity.id,
    object: "chat.completion",
    created: identity.created,
    model: identity.model,
    choices: choices.map((choice) => ({
      index: choice.index,
      message: {
        role: "assistant",
        content: choice.text,
        reasoning_content: null,
        tool_calls: toolCallsBody(choice.toolCalls),
      },
      logprobs: null,
      finish_reason: choice.finishReason,
      stop_reason: null,
    })),
    usage: totals,
    prompt_logprobs: null,
  };
}

export function completionBody(identity: ResponseIdentity, choices: ChoiceResult[], totals: Usage): unknown {
  return {
    id: identity.id,
    object: "text_completion",
    created: identity.created,
    model: identity.model,
    choices: choices.map((choice) => ({
      index: choice.index,
      text: choice.text,
      logprobs: null,
      finish_reason: choice.finishReason,
      stop_reason: null,
      prompt_logprobs: null,
    })),
    usage: totals,
  };
}

/** Builds the `data: ...` events of one streamed response. */
export class SseChunks {
  private readonly head: string;
  /** Per choice, everything of a mid-reply token's event before its JSON-quoted text. */
  private readonly tokenOpenings: string[] = [];
  /** Everything of a mid-reply token's event after its text. */
  private readonly tokenClosing: string;

  constructor(
    identity: ResponseIdentity,
    private readonly endpoint: "chat" | "completion",
    numChoices: number,
  ) {
    const object = endpoint === "chat" ? "chat.completion.chunk" : "text_completion";
    this.head =
      `data: {"id":${JSON.stringify(identity.id)},"object":"${object}","created":${identity.created},` +
      `"model":${JSON.stringify(identity.model)},"choices":`;
    // Every token but a choice's last is the same event around a different text: frame it once, not per token.
    for (let index = 0; index < numChoices; index++) {
      this.tokenOpenings.push(
        endpoint === "chat"
          ? `${this.head}[{"index":${index},"delta":{"content":`
          : `${this.head}[{"index":${index},"text":`,
      );
    }
    this.tokenClosing = `${endpoint === "chat" ? "}" : ""},"logprobs":null,"finish_reason":null}]}\n\n`;
  }

  /** The chat stream's opening delta for one choice, as vLLM sends it with the first token. */
  role(index: number): string {
    return (
      `${this.head}[{"index":${index},"delta":{"role":"assistant","content":""},` +
      `"logprobs":null,"finish_reason":null}]}\n\n`
    );
  }

  /** A text delta; the last one of a choice carries its finish reason. */
  delta(index: number, text: string, finishReason: FinishReasonOut | null): string {
    if (finishReason === null) {
      return (this.tokenOpenings[index] as string) + JSON.stringify(text) + this.tokenClosing;
    }
    const ending = `"logprobs":null,"finish_reason":"${finishReason}","stop_reason":null}]}\n\n`;
    if (this.endpoint === "chat") {
      const delta = text.length > 0 ? `{"content":${JSON.stringify(text)}}` : "{}";
      return `${this.head}[{"index":${index},"delta":${delta},${ending}`;
    }
    return `${this.head}[{"index":${index},"text":${JSON.stringify(text)},${ending}`;
  }

  /** A chunk of a choice whose text goes through a tool parser: content and/or tool-call fragments. */
  toolDelta(index: number, delta: StreamDelta | undefined, finishReason: FinishReasonOut | null): string {
    const fields: string[] = [];
    if (delta?.content !== undefined) fields.push(`"content":${JSON.stringify(delta.content)}`);
    if (delta && delta.toolCalls.length > 0) fields.push(`"tool_calls":${JSON.stringify(delta.toolCalls)}`);
    const ending =
      finishReason === null
        ? `"logprobs":null,"finish_reason":null}]}\n\n`
        : `"logprobs":null,"finish_reason":"${finishReason}","stop_reason":null}]}\n\n`;
    return `${this.head}[{"index":${index},"delta":{${fields.join(",")}},${ending}`;
  }

  /** The closing usage chunk sent when stream_options.include_usage is set. */
  usage(totals: Usage): string {
    return `${this.head}[],"usage":${JSON.stringify(totals)}}\n\n`;
  }
}

export const SSE_DONE = "data: [DONE]\n\n";
