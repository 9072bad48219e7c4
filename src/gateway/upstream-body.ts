// The body sent to an engine: the client's bytes as they are whenever possible.
import { GatewayError } from "../core/errors.js";
import type { CompletionRequest } from "./completion-request.js";
import { writeOutputLimit } from "./output-limit.js";

const USAGE_OPTION = Buffer.from('"stream_options":{"include_usage":true},');

/**
 * Streams always ask the engine for its usage chunk (budgets and token metrics need it); the client gets
 * it only if it asked. The body is re-serialised only when the model id must change, the budget lowered
 * the output limit, or the client set stream_options without include_usage; otherwise the option is spliced
 * into the raw bytes.
 */
export class UpstreamBodies {
  private readonly byModel = new Map<string, Buffer>();
  /** The client did not ask for usage in its stream: drop the engine's usage chunk. */
  readonly stripUsage: boolean;
  private readonly needsUsageOption: boolean;

  /**
   * @param raw the bytes to send when nothing else must change (the client's, or the adapted body's)
   * @param maxTokens when set, the completion-token limit the engine gets (the budget's clamp), written into
   *   the field the request's API reads (output-limit.ts: Responses `max_output_tokens`, chat the one(s) the
   *   client used, else `max_tokens`)
   * @param body the body `raw` encodes, when it is not the client's (an adapted request)
   */
  constructor(
    private readonly raw: Buffer,
    private readonly request: CompletionRequest,
    private readonly maxTokens?: number,
    private readonly body: Record<string, unknown> = request.body,
  ) {
    const options = request.body["stream_options"];
    const clientAsked =
      typeof options === "object" &&
      options !== null &&
      (options as Record<string, unknown>)["include_usage"] === true;
    // The Responses and Messages APIs report usage in their stream whatever the client asks: nothing to add or
    // strip (and `stream_options` is no field of theirs).
    this.stripUsage =
      request.stream && !clientAsked && request.endpoint !== "responses" && request.endpoint !== "messages";
    this.needsUsageOption = this.stripUsage;
  }

  forModel(model: string): Buffer {
    const sameModel = this.body["model"] === model;
    const clamped = this.maxTokens !== undefined;
    if (sameModel && !this.needsUsageOption && !clamped) return this.raw;
    let body = this.byModel.get(model);
    if (body === undefined) {
      body =
        sameModel && !clamped && !("stream_options" in this.body)
          ? this.spliceUsageOption()
          : this.reserialise(model);
      this.byModel.set(model, body);
    }
    return body;
  }

  private spliceUsageOption(): Buffer {
    const open = this.raw.indexOf(0x7b /* { */);
    return Buffer.concat([this.raw.subarray(0, open + 1), USAGE_OPTION, this.raw.subarray(open + 1)]);
  }

  private reserialise(model: string): Buffer {
    const body: Record<string, unknown> = { ...this.body, model };
    if (this.needsUsageOption) {
      const options = body["stream_options"];
      body["stream_options"] = {
        ...(typeof options === "object" && options !== null ? options : {}),
        include_usage: true,
      };
    }
    if (this.maxTokens !== undefined) writeOutputLimit(this.request.endpoint, body, this.maxTokens);
    try {
      return Buffer.from(JSON.stringify(body));
    } catch (err) {
      // Parsing bounds the nesting, so this is not expected; still a client's body, never a 500.
      throw new GatewayError("invalid_request", "the request body cannot be re-encoded for the engine", {
        cause: err,
      });
    }
  }
}
