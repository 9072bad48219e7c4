// Relays a Responses API event stream (`event: response.x` + `data: {...}`): notes the response id, reads the
// usage of the final event and splices x_agent_serve into it; every event passes through as the engine sent it.
import type { CallRestorer } from "./adaptation/restore.js";
import { spliceMemberIntoJson, withReceipt } from "./response-metadata.js";
import type { StreamReceipt, StreamRelay } from "./stream-relay.js";
import { usageFrom, type TokenUsage } from "./usage.js";

const EVENT_END = Buffer.from("\n\n");
const DATA_LINE = Buffer.from("data: ");
const CREATED = Buffer.from('"type":"response.created"');
/** The events that end a response's stream, whatever its outcome. */
const FINAL = [
  Buffer.from('"type":"response.completed"'),
  Buffer.from('"type":"response.incomplete"'),
  Buffer.from('"type":"response.failed"'),
];
const DONE = Buffer.from("data: [DONE]");
/** The end of a delta event's type (`response.output_text.delta`, `response.function_call_arguments.delta`). */
const DELTA_TYPE = Buffer.from('.delta"');

interface FinalEvent {
  response?: { id?: unknown; usage?: unknown };
}

export class ResponsesRelay implements StreamRelay {
  private held: Buffer | undefined;
  private ended = false;
  private usageSeen: TokenUsage | undefined;
  private id: string | undefined;
  private events = 0;
  private deltas = 0;

  /**
   * @param member `,"x_agent_serve":{...}`, spliced into the final event (the one holding the response)
   * @param restorer for an adapted request: puts the client's names and tools back into the events
   * @param receipt the route receipt, added to the metadata once the final event's usage is read
   */
  constructor(
    private readonly member: Buffer,
    private readonly restorer?: CallRestorer,
    private readonly receipt?: StreamReceipt,
  ) {}

  get complete(): boolean {
    return this.ended;
  }

  get usage(): TokenUsage | undefined {
    return this.usageSeen;
  }

  /** Delta events relayed: one per generated token (of text, tool arguments or reasoning) as engines send them. */
  get generatedEvents(): number {
    return this.deltas;
  }

  get responseId(): string | undefined {
    return this.id;
  }

  push(input: Buffer): Buffer[] {
    let chunk = this.held === undefined ? input : Buffer.concat([this.held, input]);
    this.held = undefined;
    const lastEnd = chunk.lastIndexOf(EVENT_END);
    let complete = lastEnd < 0 ? 0 : lastEnd + EVENT_END.length;
    if (complete < chunk.length) this.held = chunk.subarray(complete);
    if (complete === 0) return [];
    if (this.restorer !== undefined) {
      chunk = this.restorer.events(chunk.subarray(0, complete));
      complete = chunk.length;
    }
    this.events += countEvents(chunk, complete);
    for (
      let at = find(chunk, DELTA_TYPE, 0, complete);
      at >= 0;
      at = find(chunk, DELTA_TYPE, at + 1, complete)
    )
      this.deltas++;
    if (this.id === undefined) this.readCreated(chunk, complete);
    if (this.ended) return [chunk.subarray(0, complete)];
    const finalAt = findFinal(chunk, complete);
    if (finalAt < 0) {
      if (find(chunk, DONE, 0, complete) >= 0) this.ended = true;
      return [chunk.subarray(0, complete)];
    }
    // The final event: its data line's JSON gets the metadata; the bytes around it pass as slices.
    const start = eventStart(chunk, finalAt);
    const end = chunk.indexOf(EVENT_END, finalAt);
    const dataAt = chunk.indexOf(DATA_LINE, start);
    const payload = chunk.subarray(dataAt + DATA_LINE.length, end);
    this.ended = true;
    this.readFinal(payload);
    const spliced = spliceMemberIntoJson(
      payload,
      withReceipt(this.member, this.usageSeen, this.receipt, this.id),
    );
    if (spliced === undefined) return [chunk.subarray(0, complete)];
    return [chunk.subarray(0, dataAt + DATA_LINE.length), spliced, chunk.subarray(end, complete)];
  }

  flush(): Buffer[] {
    const rest = this.held;
    this.held = undefined;
    return rest === undefined ? [] : [rest];
  }

  errorEnding(message: string, code: string): Buffer[] {
    const payload = { type: "error", code, message, param: null, sequence_number: this.events };
    return [Buffer.from(`event: error\ndata: ${JSON.stringify(payload)}\n\n`)];
  }

  private readCreated(chunk: Buffer, before: number): void {
    const at = find(chunk, CREATED, 0, before);
    if (at < 0) return;
    const dataAt = chunk.indexOf(DATA_LINE, eventStart(chunk, at));
    const end = chunk.indexOf(EVENT_END, at);
    const parsed = parseJson(chunk.subarray(dataAt + DATA_LINE.length, end)) as FinalEvent | undefined;
    const id = parsed?.response?.id;
    if (typeof id === "string") this.id = id;
  }

  private readFinal(payload: Buffer): void {
    const parsed = parseJson(payload) as FinalEvent | undefined;
    const id = parsed?.response?.id;
    if (this.id === undefined && typeof id === "string") this.id = id;
    this.usageSeen = usageFrom(parsed?.response?.usage) ?? this.usageSeen;
  }
}

function parseJson(bytes: Buffer): unknown {
  try {
    return JSON.parse(bytes.toString("utf8"));
  } catch {
    return undefined;
  }
}

function find(chunk: Buffer, needle: Buffer, from: number, before: number): number {
  const at = chunk.indexOf(needle, from);
  return at >= 0 && at < before ? at : -1;
}

function findFinal(chunk: Buffer, before: number): number {
  let first = -1;
  for (const marker of FINAL) {
    const at = find(chunk, marker, 0, before);
    if (at >= 0 && (first < 0 || at < first)) first = at;
  }
  return first;
}

function eventStart(chunk: Buffer, at: number): number {
  const previousEnd = chunk.lastIndexOf(EVENT_END, at);
  return previousEnd < 0 ? 0 : previousEnd + EVENT_END.length;
}

function countEvents(chunk: Buffer, before: number): number {
  let n = 0;
  for (let at = chunk.indexOf(EVENT_END); at >= 0 && at < before; at = chunk.indexOf(EVENT_END, at + 2)) n++;
  return n;
}
