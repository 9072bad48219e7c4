// Responses API continuations: the next engine answers through chat (responses-as-chat.ts), and its chunks are
// written as the events of the Responses stream the client holds: the text goes on in the client's open
// output_text part (same item id, output_index, content_index), a cut function call is restarted
// (regenerated-call.ts) under its item, new items take the next output indexes, sequence_number goes on, and the
// final event is the created response completed: every output item whole, the usage rebased, x_agent_serve
// (with `migrated`) beside it, as the first engine's relay puts it.
import type { CallRestorer } from "../adaptation/restore.js";
import { usageFrom } from "../usage.js";
import { RegeneratedCall } from "./regenerated-call.js";
import type { OutputItemSoFar, ResponsesTranscript } from "./responses-transcript.js";
import { dataJson, formatEvent, isRecord, type SseEvent } from "./sse-events.js";
import { rebasedUsage, SpliceRelay, type SpliceOptions } from "./splice-relay.js";
import type { ToolCallSoFar } from "./transcript.js";

/** An output item of the client's stream, as this relay goes on with it. */
interface Item extends OutputItemSoFar {
  status: string;
}

/** A call of the next engine's answer (by its chat index): the output item it writes into. */
interface CallSlot {
  readonly item: Item;
  /** Set when it regenerates a call the client holds. */
  readonly regenerated?: RegeneratedCall;
}

export class ResponsesSpliceRelay extends SpliceRelay {
  private readonly items: Item[];
  /** The calls the client holds, in order: item.call of their items. */
  private readonly relayedCalls: readonly ToolCallSoFar[];
  private readonly slots = new Map<number, CallSlot>();
  private sequence: number;
  private finish: string | undefined;
  private readonly prefillTokens: number;
  private readonly idTail: string;

  /**
   * @param transcript what the client holds (read now)
   * @param restorer for an adapted request: the client's names for the calls and the tools
   */
  constructor(
    private readonly transcript: ResponsesTranscript,
    private readonly restorer: CallRestorer | undefined,
    options: SpliceOptions,
  ) {
    super(options, transcript.textEvents + transcript.calls.length);
    this.items = transcript.items.map((item) => ({
      ...item,
      ...(item.call === undefined ? {} : { call: { ...item.call } }),
      status: item.itemDone ? "completed" : "in_progress",
    }));
    this.relayedCalls = this.items.flatMap((item) => (item.call === undefined ? [] : [item.call]));
    this.sequence = transcript.lastSequence + 1;
    this.prefillTokens = transcript.textEvents;
    const id = transcript.response?.["id"];
    this.idTail = typeof id === "string" ? id.replace(/^resp_/, "") : "continued";
  }

  errorEnding(message: string, code: string): Buffer[] {
    return [this.event("error", { code, message, param: null })];
  }

  protected splice(event: SseEvent): Buffer | undefined {
    const out = this.spliced(event);
    if (out.length === 0 || this.stopped !== undefined) return undefined;
    const bytes = Buffer.concat(out);
    return this.restorer === undefined ? bytes : this.restorer.events(bytes);
  }

  private spliced(event: SseEvent): Buffer[] {
    if (event.data === "[DONE]") return this.finished();
    const chunk = dataJson(event);
    if (!isRecord(chunk)) return [];
    if (chunk["error"] !== undefined) {
      const error = chunk["error"];
      const what = isRecord(error) && typeof error["message"] === "string" ? error["message"] : "an error";
      this.stop(`backend ${this.options.backendId} sent an error event mid-answer: ${what}`, true);
      return [];
    }
    const usage = usageFrom(chunk["usage"]);
    if (usage !== undefined) this.clientUsage = rebasedUsage(usage, this.prefillTokens);
    const choices = Array.isArray(chunk["choices"]) ? (chunk["choices"] as unknown[]) : [];
    const choice = choices[0];
    // The usage chunk comes after the finishing one: the answer is whole, its final event goes now.
    if (!isRecord(choice)) return usage !== undefined && this.finish !== undefined ? this.finished() : [];
    const out: Buffer[] = [];
    const delta = isRecord(choice["delta"]) ? choice["delta"] : {};
    if (typeof delta["content"] === "string" && delta["content"] !== "")
      out.push(...this.text(delta["content"]));
    const reasoning = delta["reasoning_content"] ?? delta["reasoning"];
    if (typeof reasoning === "string" && reasoning !== "")
      this.diverged("the continuation reasons, and the client's response has no reasoning item to put it in");
    if (Array.isArray(delta["tool_calls"]))
      for (const call of delta["tool_calls"] as unknown[]) out.push(...this.toolCall(call));
    const finish = choice["finish_reason"];
    if (typeof finish === "string") {
      this.finish = finish;
      if (!this.callsDone()) return [];
      out.push(...this.closeAll(finish === "length" ? "incomplete" : "completed"));
    }
    return out;
  }

  /** Text goes on in the client's open message, else in a new message item. */
  private text(delta: string): Buffer[] {
    const out: Buffer[] = [];
    let open = this.openMessage();
    if (open === undefined) {
      if (!this.callsDone()) return [];
      out.push(...this.closeAll("completed"));
      open = this.add({ id: `msg_${this.idTail}_${this.items.length}`, type: "message", role: "assistant" });
      out.push(this.added(open));
      out.push(
        this.event("response.content_part.added", {
          ...this.at(open),
          content_index: 0,
          part: { type: "output_text", text: "", annotations: [], logprobs: [] },
        }),
      );
    }
    open.text += delta;
    this.generated++;
    out.push(
      this.event("response.output_text.delta", { ...this.at(open), content_index: 0, delta, logprobs: [] }),
    );
    return out;
  }

  /** One chat tool-call delta: a relayed call regenerated (only what extends it goes on), or a new call item. */
  private toolCall(call: unknown): Buffer[] {
    if (!isRecord(call) || typeof call["index"] !== "number") return [];
    const fn = isRecord(call["function"]) ? call["function"] : {};
    const out: Buffer[] = [];
    let slot = this.slots.get(call["index"]);
    if (slot === undefined) {
      const relayed = this.relayedCalls[this.slots.size];
      // A new call: the ones before it in this answer are whole.
      for (const earlier of this.slots.values()) earlier.regenerated?.end();
      if (relayed !== undefined) {
        const item = this.items[relayed.index]!;
        // What the client held when the continuation began (the item's own arguments grow as the call goes on).
        slot = { item, regenerated: new RegeneratedCall({ ...relayed }) };
      } else {
        if (!this.callsDone()) return [];
        out.push(...this.closeAll("completed"));
        const name = typeof fn["name"] === "string" ? fn["name"] : "";
        const callId =
          typeof call["id"] === "string" ? call["id"] : `call_${this.idTail}_${this.items.length}`;
        const item = this.add(
          {
            id: `fc_${this.idTail}_${this.items.length}`,
            type: "function_call",
            call_id: callId,
            name,
            arguments: "",
          },
          { index: this.items.length, id: callId, name, args: "", closed: false },
        );
        slot = { item };
        out.push(this.added(item));
      }
      this.slots.set(call["index"], slot);
    }
    const piece = typeof fn["arguments"] === "string" ? fn["arguments"] : "";
    const { item, regenerated } = slot;
    let rest = piece;
    if (regenerated !== undefined) {
      if (typeof fn["name"] === "string") regenerated.named(fn["name"]);
      rest = regenerated.next(piece);
      if (regenerated.diverged !== undefined) return this.diverged(regenerated.diverged);
      if (rest !== "" && item.textDone)
        return this.diverged(
          `the regenerated tool call '${regenerated.relayed.name}' is longer than the one relayed`,
        );
    }
    if (rest === "") return out;
    item.call!.args += rest;
    this.generated++;
    out.push(this.event("response.function_call_arguments.delta", { ...this.at(item), delta: rest }));
    return out;
  }

  /** Every call the client holds was regenerated whole (this answer finished, or went past them). */
  private callsDone(): boolean {
    for (const relayed of this.relayedCalls) {
      const slot = [...this.slots.values()].find((s) => s.item.call === relayed);
      if (slot === undefined) {
        this.diverged(`the continuation did not call '${relayed.name}' again`);
        return false;
      }
      slot.regenerated!.end();
      if (slot.regenerated!.diverged !== undefined) {
        this.diverged(slot.regenerated!.diverged);
        return false;
      }
    }
    return true;
  }

  /** The done events the client lacks, for every item not closed yet. */
  private closeAll(status: string): Buffer[] {
    const out: Buffer[] = [];
    for (const item of this.items) {
      if (item.itemDone) continue;
      if (item.type === "message") {
        const part = { type: "output_text", text: item.text, annotations: [] };
        if (!item.textDone)
          out.push(
            this.event("response.output_text.done", {
              ...this.at(item),
              content_index: 0,
              text: item.text,
              logprobs: [],
            }),
          );
        if (!item.partDone)
          out.push(this.event("response.content_part.done", { ...this.at(item), content_index: 0, part }));
      } else if (!item.textDone) {
        out.push(
          this.event("response.function_call_arguments.done", {
            ...this.at(item),
            arguments: item.call!.args,
            name: item.call!.name,
          }),
        );
      }
      item.textDone = item.partDone = item.itemDone = true;
      item.status = status;
      out.push(
        this.event("response.output_item.done", {
          output_index: this.items.indexOf(item),
          item: whole(item),
        }),
      );
    }
    return out;
  }

  /** The answer's final event: the created response, its status completed (or incomplete at the token limit). */
  private finished(): Buffer[] {
    if (this.ended || (this.finish === undefined && !this.callsDone())) return [];
    const status = this.finish === "length" ? "incomplete" : "completed";
    const out = this.closeAll(status);
    const usage = this.clientUsage;
    const response = {
      ...this.transcript.response,
      status,
      incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
      output: this.items.map(whole),
      usage:
        usage === undefined
          ? null
          : {
              input_tokens: usage.promptTokens,
              input_tokens_details: { cached_tokens: usage.cachedTokens },
              output_tokens: usage.completionTokens,
              output_tokens_details: { reasoning_tokens: 0 },
              total_tokens: usage.promptTokens + usage.completionTokens,
            },
    };
    // vLLM ends every Responses stream with response.completed, its status saying "incomplete" at the token
    // limit: the continued stream ends as the first engine's would have.
    out.push(this.event("response.completed", { response, x_agent_serve: this.finalMeta() }));
    this.ended = true;
    return out;
  }

  private openMessage(): Item | undefined {
    const last = this.items.at(-1);
    return last !== undefined && last.type === "message" && !last.textDone ? last : undefined;
  }

  private add(added: Record<string, unknown>, call?: ToolCallSoFar): Item {
    const type = added["type"] === "message" ? "message" : "function_call";
    const item: Item = {
      type,
      id: String(added["id"]),
      text: "",
      added: { ...added, status: "in_progress", ...(type === "message" ? { content: [] } : {}) },
      textDone: false,
      partDone: false,
      itemDone: false,
      status: "in_progress",
      ...(call === undefined ? {} : { call }),
    };
    this.items.push(item);
    return item;
  }

  private added(item: Item): Buffer {
    return this.event("response.output_item.added", {
      output_index: this.items.indexOf(item),
      item: item.added,
    });
  }

  private at(item: Item): { item_id: string; output_index: number } {
    return { item_id: item.id, output_index: this.items.indexOf(item) };
  }

  private event(type: string, fields: Record<string, unknown>): Buffer {
    return formatEvent(type, { type, sequence_number: this.sequence++, ...fields });
  }

  private diverged(why: string): [] {
    this.stop(
      `the answer was continued on backend ${this.options.backendId}, but ${why}; the answer is incomplete`,
      false,
    );
    return [];
  }
}

/** An output item as the final response lists it: everything the client was sent of it. */
function whole(item: Item): Record<string, unknown> {
  if (item.type === "message")
    return {
      ...item.added,
      status: item.status,
      content: [{ type: "output_text", text: item.text, annotations: [] }],
    };
  return { ...item.added, arguments: item.call!.args, status: item.status };
}
