// Carries one Responses API request's engine sequence to the client: the event stream as tokens arrive, or one
// response object; then stores it for previous_response_id.
import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import type { ChatMessage, ChatToolCall } from "./chat-template.js";
import type { RequestListener } from "./engine-loop.js";
import { EventStreamResponse } from "./event-stream-response.js";
import type { ResponseHost } from "./generation-response.js";
import { usage as chatUsage } from "../surface/openai-shapes.js";
import type { EngineRequest } from "./request.js";
import type { ResponseStore } from "./response-store.js";
import type { ResponsesRequest } from "./responses-request.js";
import { flatToolName } from "./responses-tools.js";
import {
  responseObject,
  ResponseEvents,
  responsesUsage,
  type FunctionCallItem,
  type MessageItem,
  type OutputItem,
  type ResponseFrame,
} from "./responses-shapes.js";
import { parseToolOutput, ToolCallStreamer, type StreamDelta, type ToolCallPlan } from "./tool-calls.js";

export function hexId(prefix: string): string {
  return `${prefix}_${randomUUID().replaceAll("-", "")}`;
}

export interface ResponsesResponseOptions {
  res: ServerResponse;
  host: ResponseHost;
  frame: ResponseFrame;
  request: ResponsesRequest;
  engineRequest: EngineRequest;
  toolPlan: ToolCallPlan | undefined;
  promptTokens: number;
  /** The conversation before this request's input (from previous_response_id), instructions excluded. */
  history: readonly ChatMessage[];
  store: ResponseStore;
}

/** The output item being streamed, with what it has accumulated. */
type OpenItem =
  { item: MessageItem; index: number; text: string } | { item: FunctionCallItem; index: number };

export class ResponsesResponse extends EventStreamResponse implements RequestListener {
  private readonly events = new ResponseEvents();
  private readonly streamer: ToolCallStreamer | undefined;
  private readonly streamedItems: OutputItem[] = [];
  private open: OpenItem | undefined;
  private flushQueued = false;

  private static flushTurn(response: ResponsesResponse): void {
    response.flushQueued = false;
    if (!response.settled) response.flush(false);
  }

  constructor(private readonly options: ResponsesResponseOptions) {
    super(options.res, options.host, options.engineRequest);
    const { res, request } = options;
    if (options.toolPlan) this.streamer = new ToolCallStreamer(options.toolPlan);
    if (request.stream) {
      res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
      const initial = responseObject(options.frame, request, "in_progress", [], null);
      this.pending.push(this.events.event("response.created", { response: initial }));
      this.pending.push(this.events.event("response.in_progress", { response: initial }));
      this.flush(false);
    }
  }

  onToken(request: EngineRequest, tokenIndex: number): void {
    if (this.settled || !this.options.request.stream) return;
    const text = request.outputTexts[tokenIndex] as string;
    const delta: StreamDelta | undefined = this.streamer
      ? this.streamer.push(text)
      : text.length > 0
        ? { content: text, toolCalls: [] }
        : undefined;
    if (delta) this.apply(delta);
    if (!this.flushQueued) {
      this.flushQueued = true;
      process.nextTick(ResponsesResponse.flushTurn, this);
    }
  }

  onFinish(request: EngineRequest): void {
    if (this.settled) return;
    if (request.finishReason === "abort") {
      this.pending.length = 0;
      this.settle("aborted");
      this.options.res.destroy();
      return;
    }
    const { frame, request: body } = this.options;
    const status = request.plannedFinishReason === "length" ? "incomplete" : "completed";
    let output: OutputItem[];
    if (body.stream) {
      this.closeOpen(status);
      output = this.streamedItems;
    } else output = this.wholeOutput(request.outputTexts.join(""), status);
    const cached = request.numCachedTokens ?? 0;
    const usage = responsesUsage(this.options.promptTokens, cached, request.numOutputTokens);
    const response = responseObject(frame, body, status, output, usage);
    if (body.stream) {
      this.pending.push(this.events.event("response.completed", { response }));
      if (!this.flush(true)) return;
    } else if (!this.sendJson(JSON.stringify(response))) return;
    // Stored once the client has it all, as vLLM stores at the end of generation (a cut stream is not kept).
    if (body.store) {
      this.options.store.put(frame.id, {
        body: response,
        history: [...this.options.history, ...body.input, assistantMessage(output)],
      });
    }
    this.settled = true;
    this.options.host.recordOutcome(
      "served",
      chatUsage(this.options.promptTokens, request.numOutputTokens, cached),
    );
  }

  /** The output of a JSON answer: the tool parser's view of the whole text. */
  private wholeOutput(text: string, status: "completed" | "incomplete"): OutputItem[] {
    const plan = this.options.toolPlan;
    const parsed = plan ? parseToolOutput(plan, text) : { content: text, calls: [] };
    const output: OutputItem[] = [];
    if (parsed.content) {
      output.push({
        id: hexId("msg"),
        type: "message",
        role: "assistant",
        status,
        content: [{ type: "output_text", text: parsed.content, annotations: [] }],
      });
    }
    for (const call of parsed.calls) {
      output.push({
        id: hexId("fc"),
        type: "function_call",
        call_id: call.id,
        ...this.clientName(call.name),
        arguments: call.arguments,
        status: "completed",
      });
    }
    return output;
  }

  /** A called function's name as the client knows it: a namespace's function by its own name and namespace. */
  private clientName(called: string): { name: string; namespace?: string } {
    const owner = this.options.request.namespaced.get(called);
    return owner === undefined ? { name: called } : { name: owner.name, namespace: owner.namespace };
  }

  /** Turns one parser delta into output-item events: text goes to a message item, each call to its own item. */
  private apply(delta: StreamDelta): void {
    if (delta.content !== undefined && delta.content.length > 0) {
      if (!this.open || this.open.item.type !== "message") {
        this.closeOpen("completed");
        const item: MessageItem = {
          id: hexId("msg"),
          type: "message",
          role: "assistant",
          status: "in_progress",
          content: [],
        };
        this.open = { item, index: this.streamedItems.length, text: "" };
        this.streamedItems.push(item);
        this.pending.push(
          this.events.event("response.output_item.added", { output_index: this.open.index, item }),
        );
        this.pending.push(
          this.events.event("response.content_part.added", {
            item_id: item.id,
            output_index: this.open.index,
            content_index: 0,
            part: { type: "output_text", text: "", annotations: [], logprobs: [] },
          }),
        );
      }
      const open = this.open as { item: MessageItem; index: number; text: string };
      open.text += delta.content;
      this.pending.push(
        this.events.event("response.output_text.delta", {
          item_id: open.item.id,
          output_index: open.index,
          content_index: 0,
          delta: delta.content,
          logprobs: [],
        }),
      );
    }
    for (const call of delta.toolCalls) {
      if (call.id !== undefined) {
        this.closeOpen("completed");
        const item: FunctionCallItem = {
          id: hexId("fc"),
          type: "function_call",
          call_id: call.id,
          ...this.clientName(call.function.name ?? ""),
          arguments: "",
          status: "in_progress",
        };
        this.open = { item, index: this.streamedItems.length };
        this.streamedItems.push(item);
        this.pending.push(
          this.events.event("response.output_item.added", {
            output_index: this.open.index,
            item: { ...item },
          }),
        );
      }
      const fragment = call.function.arguments;
      if (fragment && this.open && this.open.item.type === "function_call") {
        this.open.item.arguments += fragment;
        this.pending.push(
          this.events.event("response.function_call_arguments.delta", {
            item_id: this.open.item.id,
            output_index: this.open.index,
            delta: fragment,
          }),
        );
      }
    }
  }

  /** Ends the item being streamed with its done events. */
  private closeOpen(status: "completed" | "incomplete"): void {
    const open = this.open;
    if (!open) return;
    this.open = undefined;
    if (open.item.type === "message") {
      const text = (open as { text: string }).text;
      const part = { type: "output_text" as const, text, annotations: [] as [] };
      const base = { item_id: open.item.id, output_index: open.index, content_index: 0 };
      this.pending.push(this.events.event("response.output_text.done", { ...base, text, logprobs: [] }));
      this.pending.push(this.events.event("response.content_part.done", { ...base, part }));
      open.item.content = [part];
    } else {
      this.pending.push(
        this.events.event("response.function_call_arguments.done", {
          item_id: open.item.id,
          output_index: open.index,
          arguments: open.item.arguments,
          name: open.item.name,
        }),
      );
    }
    open.item.status = status;
    this.pending.push(
      this.events.event("response.output_item.done", { output_index: open.index, item: open.item }),
    );
  }
}

/** The response's output as the assistant turn the next request's prompt renders. */
function assistantMessage(output: readonly OutputItem[]): ChatMessage {
  let content = "";
  const toolCalls: ChatToolCall[] = [];
  for (const item of output) {
    if (item.type === "message") content += item.content.map((part) => part.text).join("");
    else
      toolCalls.push({
        id: item.call_id,
        type: "function",
        // Under the name the model wrote, so the next prompt re-renders the tokens it generated.
        function: {
          name: item.namespace === undefined ? item.name : flatToolName(item.namespace, item.name),
          arguments: item.arguments,
        },
      });
  }
  return toolCalls.length > 0 ? { role: "assistant", content, toolCalls } : { role: "assistant", content };
}
