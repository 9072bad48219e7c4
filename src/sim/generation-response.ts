// Carries one HTTP generation request's engine sequences to the client: SSE as tokens arrive, or one JSON body.
import type { ServerResponse } from "node:http";
import type { RequestListener } from "./engine-loop.js";
import type { SimFault } from "./faults.js";
import {
  chatCompletionBody,
  completionBody,
  SSE_DONE,
  SseChunks,
  usage,
  type ChoiceResult,
  type FinishReasonOut,
  type ResponseIdentity,
  type Usage,
} from "../surface/openai-shapes.js";
import type { EngineRequest } from "./request.js";
import { parseToolOutput, ToolCallStreamer, type ToolCallPlan } from "./tool-calls.js";

export type ResponseOutcome = "served" | "aborted" | "cut" | "stalled";

/** What a response needs from the server that owns it: one object shared by every response, not closures each. */
export interface ResponseHost {
  /** The engine's current fault: cut_stream and hang act on responses already under way. */
  currentFault(): SimFault;
  /** Cancels the engine requests of a response. */
  abort(requests: readonly EngineRequest[]): void;
  /** Reports how a response ended. */
  recordOutcome(outcome: ResponseOutcome, totals: Usage | undefined): void;
}

export interface GenerationResponseOptions {
  res: ServerResponse;
  host: ResponseHost;
  endpoint: "chat" | "completion";
  identity: ResponseIdentity;
  stream: boolean;
  includeUsage: boolean;
  /** One engine request per choice, in choice-index order. */
  choices: readonly EngineRequest[];
  /** Which prompt each choice answers (several with n > 1, one each for a batch of prompts). */
  promptIndexOfChoice: readonly number[];
  /** Prompt tokens as billed: once per distinct prompt. */
  promptTokens: number;
  /** Per choice, the tool call it generates (its text then goes through the tool parser), if any. */
  toolPlans?: readonly (ToolCallPlan | undefined)[];
}

/**
 * Sends `data`, then drops the connection once it has reached the socket. Destroying the response at once would
 * discard what is still corked in this turn, and the client would not get the events the fault lets through.
 */
function cutAfter(res: ServerResponse, data: string): void {
  if (data.length === 0) res.destroy();
  else res.write(data, () => res.destroy());
}

/** The engine hands tokens to this listener; it owns the HTTP response until the last byte (or the cut). */
export class GenerationResponse implements RequestListener {
  private readonly sse: SseChunks | undefined;
  private remaining: number;
  private chunksSent = 0;
  /** SSE events produced in the current event-loop turn (one or more engine steps), written together. */
  private readonly pending: string[] = [];
  private flushQueued = false;
  private settled = false;
  /** Per choice, the incremental tool parser of a streamed tool call. */
  private readonly streamers: (ToolCallStreamer | undefined)[] = [];

  /**
   * Writes a turn's events once the engine loop yields (a nextTick callback): the instant profile commits many
   * steps per turn, and one socket write per turn rather than per token is most of what a streamed answer costs.
   * Still one SSE event per token, in order; a timed profile commits one step per timer, so its tokens still go
   * out one by one.
   */
  private static flushTurn(response: GenerationResponse): void {
    response.flushQueued = false;
    if (!response.settled) response.flush(false);
  }

  constructor(private readonly options: GenerationResponseOptions) {
    this.remaining = options.choices.length;
    if (options.stream) {
      this.sse = new SseChunks(options.identity, options.endpoint, options.choices.length);
      for (const plan of options.toolPlans ?? []) this.streamers.push(plan && new ToolCallStreamer(plan));
      options.res.writeHead(200, {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
      });
    }
    options.res.on("close", () => {
      if (this.settled) return;
      // The client went away before the response was complete: free the engine's work.
      this.settle("aborted", undefined);
      options.host.abort(options.choices);
    });
  }

  /**
   * A stream's headers go out by the end of this event-loop turn, before any token. Call it after submitting the
   * choices: an engine step already due then runs first, and the headers share the socket write of its tokens
   * instead of costing one of their own (the instant profile answers a whole request within that turn).
   */
  sendHeadersSoon(): void {
    if (this.sse) setImmediate(GenerationResponse.flushHeadersIfUnsent, this);
  }

  /**
   * Sends a stream's headers on their own if no token has taken them along yet (a setImmediate callback).
   * Not res.headersSent: writeHead sets it at once, though the headers reach the socket only with the first
   * write, so a stream queued behind a long prefill sent none until its first token, and a gateway's stream
   * headers timeout took the engine for hung (docs/kv-events.md, thirteenth round).
   */
  private static flushHeadersIfUnsent(response: GenerationResponse): void {
    const res = response.options.res;
    if (!response.settled && response.chunksSent === 0 && !res.destroyed) res.flushHeaders();
  }

  onToken(request: EngineRequest, tokenIndex: number): void {
    if (this.settled || !this.sse) return;
    const choices = this.options.choices;
    const index = choices.length === 1 ? 0 : choices.indexOf(request);
    const text = request.outputTexts[tokenIndex] as string;
    const last = tokenIndex === request.outputLengthTokens - 1;
    let reason: FinishReasonOut | null = last ? request.plannedFinishReason : null;
    // vLLM opens each chat choice with a role delta, sent along with its first token.
    if (tokenIndex === 0 && this.options.endpoint === "chat") this.pending.push(this.sse.role(index));
    const streamer = this.streamers[index];
    if (streamer) {
      const delta = streamer.push(text);
      // Like vLLM: once the parser has streamed a call, the stream ends with "tool_calls" (a named call: "stop").
      if (reason !== null && streamer.callsStarted > 0 && !streamer.isNamedChoice) reason = "tool_calls";
      // A token the parser holds back (a tag, the end of a call) sends nothing, unless it ends the choice.
      if (delta || reason !== null) this.pending.push(this.sse.toolDelta(index, delta, reason));
    } else this.pending.push(this.sse.delta(index, text, reason));
    // The last token is followed at once by onFinish, which sends it together with the closing events.
    if (!last) this.queueFlush();
  }

  private queueFlush(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    process.nextTick(GenerationResponse.flushTurn, this);
  }

  onFinish(request: EngineRequest): void {
    if (this.settled) return;
    if (request.finishReason === "abort") {
      // The engine itself went away (shutdown or die): so does the connection.
      this.pending.length = 0;
      this.settle("aborted", undefined);
      this.options.res.destroy();
      return;
    }
    this.remaining -= 1;
    if (this.remaining > 0) {
      this.queueFlush();
      return;
    }
    const totals = this.usage();
    if (this.sse) {
      if (this.options.includeUsage) this.pending.push(this.sse.usage(totals));
      this.pending.push(SSE_DONE);
      if (this.flush(true)) this.settle("served", totals);
      return;
    }
    this.finishJson(totals);
  }

  private usage(): Usage {
    let completion = 0;
    let cached = 0;
    const seenPrompts = new Set<number>();
    this.options.choices.forEach((request, index) => {
      completion += request.numOutputTokens;
      // Choices of one prompt (n > 1) share it: count its cached tokens once, like its prompt tokens.
      const prompt = this.options.promptIndexOfChoice[index] as number;
      if (!seenPrompts.has(prompt)) {
        seenPrompts.add(prompt);
        cached += request.numCachedTokens ?? 0;
      }
    });
    return usage(this.options.promptTokens, completion, cached);
  }

  private finishJson(totals: Usage): void {
    const choices: ChoiceResult[] = this.options.choices.map((request, index) => {
      const text = request.outputTexts.join("");
      const plan = this.options.toolPlans?.[index];
      if (!plan) return { index, text, finishReason: request.plannedFinishReason };
      const parsed = parseToolOutput(plan, text);
      // vLLM: "tool_calls" when auto found calls or a required list ended normally; a named call ends "stop".
      const called =
        (plan.mode === "auto" && parsed.calls.length > 0) ||
        (plan.mode === "required" && request.plannedFinishReason === "stop");
      return {
        index,
        text: parsed.content,
        finishReason: called ? "tool_calls" : request.plannedFinishReason,
        toolCalls: parsed.calls,
      };
    });
    const body = JSON.stringify(
      this.options.endpoint === "chat"
        ? chatCompletionBody(this.options.identity, choices, totals)
        : completionBody(this.options.identity, choices, totals),
    );
    const res = this.options.res;
    const length = Buffer.byteLength(body);
    const fault = this.options.host.currentFault();
    if (fault.kind === "hang") {
      this.settle("stalled", undefined);
      return;
    }
    res.writeHead(200, { "content-type": "application/json", "content-length": length });
    if (fault.kind === "cut_stream") {
      // Half a body, then the connection drops: the client sees a truncated response.
      this.settle("cut", undefined);
      cutAfter(res, body.slice(0, Math.floor(body.length / 2)));
      return;
    }
    res.end(body);
    this.settle("served", totals);
  }

  /**
   * Writes the queued SSE events in one socket write (ending the response if `end`), unless a fault intervenes.
   * Returns false when the response was cut or stalled instead.
   */
  private flush(end: boolean): boolean {
    const events = this.pending;
    if (events.length === 0 && !end) return true;
    const fault = this.options.host.currentFault();
    if (fault.kind === "hang") {
      // A hung engine stops mid-stream and never resumes this response; its work is dropped.
      events.length = 0;
      this.settle("stalled", undefined);
      this.options.host.abort(this.options.choices);
      return false;
    }
    const res = this.options.res;
    if (fault.kind === "cut_stream" && this.chunksSent + events.length > fault.afterChunks) {
      const allowed = Math.max(0, fault.afterChunks - this.chunksSent);
      const data = events.slice(0, allowed).join("");
      events.length = 0;
      this.settle("cut", undefined);
      this.options.host.abort(this.options.choices);
      cutAfter(res, data);
      return false;
    }
    this.chunksSent += events.length;
    const data = events.length === 1 ? (events[0] as string) : events.join("");
    events.length = 0;
    if (end) res.end(data);
    else res.write(data);
    return true;
  }

  private settle(outcome: ResponseOutcome, totals: Usage | undefined): void {
    if (this.settled) return;
    this.settled = true;
    this.options.host.recordOutcome(outcome, totals);
  }
}
