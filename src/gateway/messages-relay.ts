// Relays an Anthropic Messages event stream (`event: x` + `data: {...}`): x_agent_serve goes onto message_start's
// message (where Anthropic clients ignore unknown fields), usage is read from message_start and message_delta;
// every other event passes through as the engine sent it.
import type { StreamReceipt, StreamRelay } from "./stream-relay.js";
import { usageFrom, type TokenUsage } from "./usage.js";

const EVENT_END = Buffer.from("\n\n");
const DATA_LINE = Buffer.from("data: ");
const MESSAGE_START = Buffer.from("event: message_start");
const MESSAGE_DELTA = Buffer.from("event: message_delta");
const MESSAGE_STOP = Buffer.from("event: message_stop");
const BLOCK_DELTA = Buffer.from("event: content_block_delta");

interface StartEvent {
  message?: { usage?: unknown } & Record<string, unknown>;
}

export class MessagesRelay implements StreamRelay {
  private held: Buffer | undefined;
  private ended = false;
  private started: TokenUsage | undefined;
  private outputTokens: number | undefined;
  private deltas = 0;
  private readonly meta: unknown;

  /**
   * @param member `,"x_agent_serve":{...}`, as the other relays take it
   * @param receipt the route receipt, put on message_delta (where the usage is complete) as `x_agent_serve`
   */
  constructor(
    member: Buffer,
    private readonly receipt?: StreamReceipt,
  ) {
    this.meta = (
      JSON.parse(`{${member.subarray(1).toString("utf8")}}`) as { x_agent_serve: unknown }
    ).x_agent_serve;
  }

  get complete(): boolean {
    return this.ended;
  }

  get usage(): TokenUsage | undefined {
    const started = this.started;
    if (started === undefined) return undefined;
    return {
      promptTokens: started.promptTokens,
      completionTokens: this.outputTokens ?? started.completionTokens,
      cachedTokens: started.cachedTokens,
    };
  }

  get generatedEvents(): number {
    return this.deltas;
  }

  get responseId(): undefined {
    return undefined;
  }

  push(input: Buffer): Buffer[] {
    const chunk = this.held === undefined ? input : Buffer.concat([this.held, input]);
    this.held = undefined;
    const out: Buffer[] = [];
    let at = 0;
    for (let end = chunk.indexOf(EVENT_END, at); end >= 0; end = chunk.indexOf(EVENT_END, at)) {
      out.push(this.relayEvent(chunk.subarray(at, end + EVENT_END.length)));
      at = end + EVENT_END.length;
    }
    if (at < chunk.length) this.held = chunk.subarray(at);
    return out;
  }

  flush(): Buffer[] {
    const rest = this.held;
    this.held = undefined;
    return rest === undefined ? [] : [rest];
  }

  errorEnding(message: string): Buffer[] {
    const payload = { type: "error", error: { type: "api_error", message } };
    return [Buffer.from(`event: error\ndata: ${JSON.stringify(payload)}\n\n`)];
  }

  /** One whole event: message_start gets the metadata; the others are read (usage, deltas) and passed on. */
  private relayEvent(event: Buffer): Buffer {
    if (startsWith(event, BLOCK_DELTA)) {
      this.deltas++;
      return event;
    }
    if (startsWith(event, MESSAGE_STOP)) {
      this.ended = true;
      return event;
    }
    if (startsWith(event, MESSAGE_DELTA)) {
      const parsed = dataOf(event) as { usage?: { output_tokens?: unknown } } | undefined;
      const output = parsed?.usage?.output_tokens;
      if (typeof output === "number") this.outputTokens = output;
      const usage = this.usage;
      const receipt = usage === undefined || parsed === undefined ? undefined : this.receipt?.(usage);
      if (receipt === undefined) return event;
      // The whole metadata again, with the receipt: a client keeping the last `x_agent_serve` has every field.
      return Buffer.from(
        `event: message_delta\ndata: ${JSON.stringify({ ...parsed, x_agent_serve: { ...(this.meta as object), ...receipt } })}\n\n`,
      );
    }
    if (!startsWith(event, MESSAGE_START)) return event;
    const parsed = dataOf(event) as StartEvent | undefined;
    if (parsed?.message === undefined) return event;
    this.started = usageFrom(parsed.message.usage);
    parsed.message["x_agent_serve"] = this.meta;
    return Buffer.from(`event: message_start\ndata: ${JSON.stringify(parsed)}\n\n`);
  }
}

function startsWith(event: Buffer, prefix: Buffer): boolean {
  return event.length >= prefix.length && event.subarray(0, prefix.length).equals(prefix);
}

/** The JSON of an event's data line, or undefined. */
function dataOf(event: Buffer): unknown {
  const at = event.indexOf(DATA_LINE);
  if (at < 0) return undefined;
  const end = event.indexOf(0x0a /* \n */, at);
  try {
    return JSON.parse(event.toString("utf8", at + DATA_LINE.length, end < 0 ? event.length : end));
  } catch {
    return undefined;
  }
}
