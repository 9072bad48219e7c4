// What the client was sent of a Responses API stream so far: the response object of response.created, the output
// items by output_index (message text, function calls with their arguments), which of their done events went
// by, and the last sequence_number, so that a continuation goes on under the same ids and numbers.
import { flatCallName } from "./responses-as-chat.js";
import { dataJson, isRecord, type SseEvent } from "./sse-events.js";
import type { AnswerTranscript, ToolCallSoFar } from "./transcript.js";

/** One output item as the client holds it. */
export interface OutputItemSoFar {
  readonly type: "message" | "function_call";
  readonly id: string;
  /** message: the output_text part's text; function_call: unused (its call holds the arguments). */
  text: string;
  /** Function calls: the call (ToolCallSoFar.index is this item's output_index). */
  readonly call?: ToolCallSoFar;
  /** The item as output_item.added sent it (call_id, name, namespace...), for its done events. */
  readonly added: Record<string, unknown>;
  /** Done events the client already has: text (output_text.done / arguments.done), part, item. */
  textDone: boolean;
  partDone: boolean;
  itemDone: boolean;
}

export class ResponsesTranscript implements AnswerTranscript {
  text = "";
  textEvents = 0;
  readonly calls: ToolCallSoFar[] = [];
  blocker: string | undefined;
  /** The response object of response.created: the continued answer's final event is built on it. */
  response: Record<string, unknown> | undefined;
  readonly items: OutputItemSoFar[] = [];
  /** The last sequence_number sent (-1: none). */
  lastSequence = -1;

  record(events: readonly SseEvent[]): void {
    for (const event of events) {
      const data = dataJson(event);
      if (!isRecord(data)) continue;
      if (typeof data["sequence_number"] === "number")
        this.lastSequence = Math.max(this.lastSequence, data["sequence_number"]);
      const type = typeof data["type"] === "string" ? data["type"] : event.name;
      const item = typeof data["output_index"] === "number" ? this.items[data["output_index"]] : undefined;
      switch (type) {
        case "response.created":
          if (isRecord(data["response"])) this.response = data["response"];
          break;
        case "response.output_item.added":
          this.addItem(data);
          break;
        case "response.content_part.added": {
          const part = isRecord(data["part"]) ? data["part"]["type"] : undefined;
          if (part !== "output_text" || data["content_index"] !== 0)
            this.blocker ??= `a ${String(part)} content part was relayed (only one output_text part can be continued)`;
          break;
        }
        case "response.output_text.delta":
          if (item !== undefined && typeof data["delta"] === "string" && data["delta"] !== "") {
            item.text += data["delta"];
            this.text += data["delta"];
            this.textEvents++;
          }
          break;
        case "response.function_call_arguments.delta":
          if (item?.call !== undefined && typeof data["delta"] === "string") item.call.args += data["delta"];
          break;
        case "response.output_text.done":
        case "response.function_call_arguments.done":
          if (item !== undefined) item.textDone = true;
          break;
        case "response.content_part.done":
          if (item !== undefined) item.partDone = true;
          break;
        case "response.output_item.done":
          if (item !== undefined) item.itemDone = true;
          if (item?.call !== undefined) item.call.closed = true;
          break;
        case "response.completed":
        case "response.incomplete":
        case "response.failed":
          this.blocker ??= "the answer had ended";
          break;
        default:
          if (type?.startsWith("response.reasoning") === true)
            this.blocker ??= "reasoning was relayed (no engine-neutral way to prefill it)";
      }
    }
  }

  private addItem(data: Record<string, unknown>): void {
    const added = isRecord(data["item"]) ? data["item"] : {};
    const index = typeof data["output_index"] === "number" ? data["output_index"] : this.items.length;
    const id = typeof added["id"] === "string" ? added["id"] : "";
    const base = { id, text: "", added, textDone: false, partDone: false, itemDone: false };
    if (added["type"] === "message") {
      if (this.calls.length > 0) this.blocker ??= "text followed a tool call";
      this.items[index] = { type: "message", ...base };
    } else if (added["type"] === "function_call") {
      const call: ToolCallSoFar = {
        index,
        id: typeof added["call_id"] === "string" ? added["call_id"] : "",
        name: flatCallName(added),
        args: typeof added["arguments"] === "string" ? added["arguments"] : "",
        closed: false,
      };
      this.calls.push(call);
      this.items[index] = { type: "function_call", ...base, call };
    } else
      this.blocker ??= `a ${String(added["type"])} output item was relayed (only messages and function calls)`;
  }
}
