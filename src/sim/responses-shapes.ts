// The Responses API's objects and streaming events, in the shapes vLLM's /v1/responses returns them.
import type { ResponsesRequest } from "./responses-request.js";

export interface ResponsesUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number; tool_output_tokens: number };
  total_tokens: number;
}

export function responsesUsage(input: number, cached: number, output: number): ResponsesUsage {
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: 0, tool_output_tokens: 0 },
    total_tokens: input + output,
  };
}

export interface OutputTextPart {
  type: "output_text";
  text: string;
  annotations: [];
  logprobs?: [];
}

export interface MessageItem {
  id: string;
  type: "message";
  role: "assistant";
  status: "in_progress" | "completed" | "incomplete";
  content: OutputTextPart[];
}

export interface FunctionCallItem {
  id: string;
  type: "function_call";
  call_id: string;
  /** The function's name as the client gave it (inside its namespace, if it has one). */
  name: string;
  /** The namespace tool the function belongs to; absent for a top-level function. */
  namespace?: string;
  arguments: string;
  status: "in_progress" | "completed" | "incomplete";
}

export type OutputItem = MessageItem | FunctionCallItem;

export type ResponseStatus = "in_progress" | "completed" | "incomplete";

export interface ResponseFrame {
  id: string;
  createdAt: number;
  model: string;
  /** The max_tokens the engine ran with (max_output_tokens, else what the context window leaves). */
  maxOutputTokens: number;
}

/** The response object (vLLM's ResponsesResponse.from_request). */
export function responseObject(
  frame: ResponseFrame,
  request: ResponsesRequest,
  status: ResponseStatus,
  output: OutputItem[],
  usage: ResponsesUsage | null,
): Record<string, unknown> {
  return {
    id: frame.id,
    created_at: frame.createdAt,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: request.instructions,
    metadata: request.metadata,
    model: frame.model,
    object: "response",
    output,
    parallel_tool_calls: request.parallelToolCalls,
    temperature: request.temperature,
    tool_choice: request.toolChoiceRaw,
    tools: request.tools,
    top_p: request.topP,
    background: false,
    max_output_tokens: frame.maxOutputTokens,
    max_tool_calls: null,
    previous_response_id: request.previousResponseId ?? null,
    prompt: null,
    reasoning: null,
    service_tier: "auto",
    status,
    text: request.text,
    top_logprobs: null,
    truncation: "disabled",
    usage,
    user: request.user,
  };
}

/** Numbers a stream's events and frames them as SSE (`event: type` then `data: json`). */
export class ResponseEvents {
  private sequence = 0;

  event(type: string, fields: Record<string, unknown>): string {
    const data = JSON.stringify({ type, sequence_number: this.sequence++, ...fields });
    return `event: ${type}\ndata: ${data}\n\n`;
  }
}
