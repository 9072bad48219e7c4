// Chat and text completion continuations: the next engine's chunks carry the first engine's id, created and
// model; its role chunk is dropped (the client has its role); a cut tool call is restarted (regenerated-call.ts);
// its usage is rebased onto the client's prompt; x_agent_serve (with `migrated`) rides on the finishing chunk.
import { sseEvent } from "../sse-relay.js";
import { usageFrom } from "../usage.js";
import { RegeneratedCall } from "./regenerated-call.js";
import { dataJson, formatEvent, isRecord, type SseEvent } from "./sse-events.js";
import { rebasedUsage, SpliceRelay, type SpliceOptions } from "./splice-relay.js";
import type { OpenAiTranscript, ToolCallSoFar } from "./transcript.js";

const DONE_EVENT = Buffer.from("data: [DONE]\n\n");

export class OpenAiSpliceRelay extends SpliceRelay {
  /** Calls the client was sent (whole or cut), which the engine generates again, by index. */
  private readonly relayedCalls: readonly ToolCallSoFar[];
  private readonly regenerated = new Map<number, RegeneratedCall>();
  /** Prompt tokens of the prefill: the next engine counts them as prompt, the client as its answer. */
  private readonly prefillTokens: number;

  /**
   * @param transcript what the client holds (read now: the prefill and the calls are those sent so far)
   * @param stripUsage the client did not ask for the usage chunk (it is read, then dropped)
   */
  constructor(
    private readonly transcript: OpenAiTranscript,
    private readonly api: "chat" | "completions",
    private readonly stripUsage: boolean,
    options: SpliceOptions,
  ) {
    super(options, transcript.textEvents + transcript.calls.length);
    this.relayedCalls = transcript.calls.map((call) => ({ ...call }));
    this.prefillTokens = transcript.textEvents;
  }

  errorEnding(message: string, code: string): Buffer[] {
    const error = sseEvent({ error: { message, type: "upstream_error", param: null, code } });
    return this.ended ? [error] : [error, DONE_EVENT];
  }

  protected splice(event: SseEvent): Buffer | undefined {
    if (event.data === "[DONE]") {
      this.ended = true;
      return DONE_EVENT;
    }
    const chunk = dataJson(event);
    if (!isRecord(chunk)) return formatEvent(event.name, event.data);
    if (chunk["error"] !== undefined) {
      const error = chunk["error"];
      const what = isRecord(error) && typeof error["message"] === "string" ? error["message"] : "an error";
      return this.stop(`backend ${this.options.backendId} sent an error event mid-answer: ${what}`, true);
    }
    this.sameIds(chunk);
    const usage = chunk["usage"];
    if (isRecord(usage)) this.rebaseUsage(usage);
    const choices = Array.isArray(chunk["choices"]) ? (chunk["choices"] as unknown[]) : [];
    const choice = choices[0];
    if (!isRecord(choice)) {
      // The usage-only chunk.
      if (!isRecord(usage) || this.stripUsage) return undefined;
      chunk["x_agent_serve"] = this.finalMeta();
      return formatEvent(undefined, chunk);
    }
    const carries = this.api === "chat" ? this.spliceDelta(choice) : this.countText(choice["text"]);
    if (this.stopped !== undefined) return undefined;
    const finish = choice["finish_reason"];
    const finishing = finish !== null && finish !== undefined;
    if (finishing) {
      this.endCalls();
      if (this.stopped !== undefined) return undefined;
      chunk["x_agent_serve"] = this.finalMeta();
    }
    if (!carries && !finishing && !isRecord(usage)) return undefined;
    return formatEvent(undefined, chunk);
  }

  /** Every chunk of the answer carries the ids the client's first chunk had. */
  private sameIds(chunk: Record<string, unknown>): void {
    const first = this.transcript;
    if (first.id !== undefined) chunk["id"] = first.id;
    if (first.created !== undefined) chunk["created"] = first.created;
    if (first.model !== undefined) chunk["model"] = first.model;
    if (first.systemFingerprint !== undefined) chunk["system_fingerprint"] = first.systemFingerprint;
  }

  private countText(text: unknown): boolean {
    if (typeof text !== "string" || text === "") return false;
    this.generated++;
    return true;
  }

  /** The delta without its role, and with cut calls restarted; whether anything of it is left to send. */
  private spliceDelta(choice: Record<string, unknown>): boolean {
    const delta = choice["delta"];
    if (!isRecord(delta)) return false;
    delete delta["role"];
    let carries = this.countText(delta["content"]);
    if (delta["content"] === "") delete delta["content"];
    const reasoning = delta["reasoning_content"] ?? delta["reasoning"];
    if (typeof reasoning === "string" && reasoning !== "") carries = true;
    const calls = delta["tool_calls"];
    if (Array.isArray(calls)) {
      const kept = (calls as unknown[]).flatMap((call) => this.spliceCall(call));
      if (kept.length > 0) {
        delta["tool_calls"] = kept;
        carries = true;
        this.generated++;
      } else delete delta["tool_calls"];
    }
    return carries;
  }

  /** One tool-call delta, as the client must see it: nothing, or the part it does not hold yet. */
  private spliceCall(call: unknown): unknown[] {
    if (!isRecord(call) || typeof call["index"] !== "number") return [call];
    const index = call["index"];
    const relayed = this.relayedCalls.find((c) => c.index === index);
    if (relayed === undefined) {
      // A call past those the client holds: every one it holds was regenerated whole before it.
      this.endCalls();
      return this.stopped === undefined ? [call] : [];
    }
    const fn = isRecord(call["function"]) ? call["function"] : {};
    let regenerated = this.regenerated.get(index);
    if (regenerated === undefined) {
      // A new call of the regenerated answer: the previous ones are complete.
      for (const earlier of this.regenerated.values()) earlier.end();
      regenerated = new RegeneratedCall(relayed);
      this.regenerated.set(index, regenerated);
    }
    if (typeof fn["name"] === "string") regenerated.named(fn["name"]);
    const rest = regenerated.next(typeof fn["arguments"] === "string" ? fn["arguments"] : "");
    if (regenerated.diverged !== undefined) return this.diverged(regenerated.diverged);
    return rest === "" ? [] : [{ index, function: { arguments: rest } }];
  }

  /** Every call the client was sent must have been regenerated in full (the answer finished, or went past them). */
  private endCalls(): void {
    for (const relayed of this.relayedCalls) {
      const regenerated = this.regenerated.get(relayed.index);
      if (regenerated === undefined) {
        this.diverged(`the continuation did not call '${relayed.name}' again`);
        return;
      }
      regenerated.end();
      if (regenerated.diverged !== undefined) {
        this.diverged(regenerated.diverged);
        return;
      }
    }
  }

  private diverged(why: string): [] {
    this.stop(
      `the answer was continued on backend ${this.options.backendId}, but ${why}; the answer is incomplete`,
      false,
    );
    return [];
  }

  /** The engine counted the prefill as prompt; the client's answer counts it as completion. */
  private rebaseUsage(usage: Record<string, unknown>): void {
    const read = usageFrom(usage);
    if (read === undefined) return;
    const rebased = rebasedUsage(read, this.prefillTokens);
    usage["prompt_tokens"] = rebased.promptTokens;
    usage["completion_tokens"] = rebased.completionTokens;
    usage["total_tokens"] = rebased.promptTokens + rebased.completionTokens;
    const details = usage["prompt_tokens_details"];
    if (isRecord(details) && typeof details["cached_tokens"] === "number")
      details["cached_tokens"] = rebased.cachedTokens;
    this.clientUsage = rebased;
  }
}
