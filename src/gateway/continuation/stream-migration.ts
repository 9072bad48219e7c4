// One request's stream continuation (Dynamo calls it request migration): what the attempt loop asks of it at
// each attempt. The first engine's stream is recorded; when an engine breaks it mid-answer and the request
// allows, the client's stream stays open and the next attempt sends the conversation plus the answer so far to
// the next engine, whose stream is spliced into the client's (same ids, indexes, honest usage).
import type { CallRestorer } from "../adaptation/restore.js";
import type { AttemptContinuation, AttemptResult } from "../attempt.js";
import type { Endpoint } from "../completion-request.js";
import type { MigrationFields } from "../response-metadata.js";
import type { StreamBreak, StreamReceipt, StreamRelay } from "../stream-relay.js";
import { continuationBody } from "./continuation-body.js";
import { continuationBlocker, type ContinuationSettings } from "./eligibility.js";
import { MessagesSpliceRelay } from "./messages-splice.js";
import { OpenAiSpliceRelay } from "./openai-splice.js";
import { RecordingRelay } from "./recording-relay.js";
import { ResponsesSpliceRelay } from "./responses-splice.js";
import { ResponsesTranscript } from "./responses-transcript.js";
import { metaOfMember } from "./splice-relay.js";
import { MessagesTranscript, OpenAiTranscript } from "./transcript.js";

/** What the client's stream ended as, for agentserve_migrations_total{outcome}. */
export type MigrationOutcome = "continued" | "failed" | "impossible" | "diverged";

/** Where the client's stream goes: the response, written to when no engine could continue it. */
interface ClientStream {
  write(chunk: Buffer): unknown;
  end(): unknown;
  readonly destroyed: boolean;
}

export class StreamMigration {
  private readonly transcript: OpenAiTranscript | MessagesTranscript | ResponsesTranscript;
  /** Engines that broke the answer, in order. */
  private readonly from: string[] = [];
  private cause = "";
  private toolCall: MigrationFields["tool_call"] = "none";
  /** The relay the client's stream was last written through (its error ending is the stream's). */
  private clientRelay: StreamRelay | undefined;
  /** Its recording (undefined when the request cannot be continued). */
  private recording: RecordingRelay | undefined;
  /** The client's stream is open, and waits for the next engine to go on with it. */
  pending = false;

  private constructor(
    private readonly endpoint: Endpoint,
    private readonly blocker: string | undefined,
    private readonly stripUsage: boolean,
    private readonly maxContinuations: number,
    /** An adapted Responses request's: the client's names for what the continuation calls. */
    private readonly restorer: CallRestorer | undefined,
  ) {
    this.transcript =
      endpoint === "messages"
        ? new MessagesTranscript()
        : endpoint === "responses"
          ? new ResponsesTranscript()
          : new OpenAiTranscript(endpoint === "completions" ? "completions" : "chat");
  }

  /** The continuation of a streaming request (undefined for one that does not stream). */
  static begin(
    request: {
      endpoint: Endpoint;
      body: Record<string, unknown>;
      stream: boolean;
      stripUsage: boolean;
      tier: string;
      restorer?: CallRestorer | undefined;
    },
    settings: ContinuationSettings,
  ): StreamMigration | undefined {
    if (!request.stream) return undefined;
    const blocker = continuationBlocker(request.endpoint, request.body, request.tier, settings);
    return new StreamMigration(
      request.endpoint,
      blocker,
      request.stripUsage,
      settings.maxContinuations,
      request.restorer,
    );
  }

  /** Why a broken stream is not continued now; undefined when it can be. */
  get whyNot(): string | undefined {
    if (this.blocker !== undefined) return this.blocker;
    this.recording?.record();
    if (this.transcript.blocker !== undefined) return this.transcript.blocker;
    if (this.from.length >= this.maxContinuations)
      return `it was continued ${this.from.length} time(s) already (upstream.stream_continuation.max_continuations)`;
    return undefined;
  }

  /** What this attempt does with the client's stream. */
  attempt(): AttemptContinuation {
    return { resume: this.pending, keepOpenOnBreak: () => this.whyNot === undefined };
  }

  /** The engine path of this attempt: a Responses answer is continued through chat (responses-as-chat.ts). */
  path(firstPath: string): string {
    return this.pending && this.endpoint === "responses" ? "/v1/chat/completions" : firstPath;
  }

  /** The body this attempt sends the engine: the first attempt's, or it plus the answer so far. */
  body(firstBody: Buffer): Buffer {
    return this.pending ? continuationBody(this.endpoint, firstBody, this.transcript) : firstBody;
  }

  /** `x_agent_serve.migrated` of this attempt (undefined before any break). */
  get fields(): MigrationFields | undefined {
    return this.from.length === 0
      ? undefined
      : { from: [...this.from], cause: this.cause, tool_call: this.toolCall };
  }

  /**
   * The client's relay for an attempt on `backendId`: the first engine's own (made by `first`), recorded; a
   * continuing engine's spliced into the client's stream. `member` is the attempt's x_agent_serve member.
   */
  relay(
    first: () => StreamRelay,
    member: Buffer,
    receipt: StreamReceipt | undefined,
    backendId: string,
  ): StreamRelay {
    let relay: StreamRelay;
    if (!this.pending) relay = first();
    else {
      const options = { backendId, meta: metaOfMember(member), receipt };
      relay =
        this.transcript instanceof MessagesTranscript
          ? new MessagesSpliceRelay(this.transcript, options)
          : this.transcript instanceof ResponsesTranscript
            ? new ResponsesSpliceRelay(this.transcript, this.restorer, options)
            : new OpenAiSpliceRelay(
                this.transcript,
                this.endpoint === "completions" ? "completions" : "chat",
                this.stripUsage,
                options,
              );
      this.pending = false;
    }
    // A request that cannot be continued is relayed as it always was (nothing parsed, the engine's errors passed on).
    this.recording =
      this.blocker === undefined ? new RecordingRelay(relay, this.transcript, backendId) : undefined;
    this.clientRelay = this.recording ?? relay;
    return this.clientRelay;
  }

  /** An engine broke the stream and left it open: the next attempt continues it. */
  broke(broken: StreamBreak, backendId: string): void {
    this.recording?.record();
    this.from.push(backendId);
    this.cause = broken.message;
    if (this.transcript.calls.length > 0) this.toolCall = "restarted";
    this.pending = true;
  }

  /** How an answered attempt ended the client's stream, for the metric (undefined: nothing broke). */
  outcome(result: AttemptResult): MigrationOutcome | undefined {
    if (result.streamError === undefined) return this.from.length > 0 ? "continued" : undefined;
    const stopped = this.clientRelay?.stopped;
    if (stopped !== undefined && !stopped.engineFault) return "diverged";
    if (result.engineFault !== true) return undefined;
    return this.from.length > 0 ? "failed" : "impossible";
  }

  /** The error text of a stream no engine could go on with: what broke it, what failed after, what was relayed. */
  giveUpMessage(failure: string): string {
    return `${this.cause}; no engine could continue the answer (${failure}), so it is incomplete`;
  }

  /** The open stream ends with this API's error event. Returns the attempt result the request reports. */
  giveUp(res: ClientStream, message: string, code: string): AttemptResult {
    this.pending = false;
    if (!res.destroyed && this.clientRelay !== undefined) {
      res.write(Buffer.concat(this.clientRelay.errorEnding(message, code)));
      res.end();
    }
    return { status: 200, streamError: message, engineFault: true };
  }

  /** For the request's log line: the continuation's state, given how the stream ended (undefined: not ended). */
  describe(ended: StreamBreak | undefined): string | undefined {
    const from = this.from.join(",");
    if (ended === undefined) return `continued from ${from}`;
    if (!ended.engineFault && this.from.length > 0) return `diverged from ${from}`;
    if (this.from.length > 0) return `failed from ${from}`;
    const why = this.whyNot;
    return why === undefined ? undefined : `not continued: ${why}`;
  }
}
