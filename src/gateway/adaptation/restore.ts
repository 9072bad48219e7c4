// Gives a client of an adapted request the answer it expects: calls of flattened namespace functions named as
// the client named them (`{name, namespace}`), and its own tools and tool_choice in the echoed response object.
//
// Only adapted requests pay for this: a JSON answer is parsed and re-serialised once; of a stream, only the
// events that can hold a call's name or the tools (output items, `function_call_arguments.done`, the response
// snapshots) are parsed, never the per-token deltas.

/** A namespaced function as the client named it. */
export interface NamespacedName {
  namespace: string;
  name: string;
}

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const EVENT_END = Buffer.from("\n\n");
const DATA_LINE = Buffer.from("data: ");
/** Bytes only an event worth parsing holds (JSON strings escape their quotes, so text cannot fake them). */
const MARKERS = [
  Buffer.from('"function_call'),
  Buffer.from('function_call_arguments.done"'),
  Buffer.from('"tools":'),
];
const EVENT_LINE = Buffer.from("event: ");
const DELTA_SUFFIX = Buffer.from(".delta");

export class CallRestorer {
  /**
   * @param names flat name -> the client's namespace and name
   * @param clientTools the request's `tools` as the client sent them (echoed back in response objects)
   * @param clientToolChoice likewise its `tool_choice` (undefined when it sent none)
   */
  constructor(
    private readonly names: ReadonlyMap<string, NamespacedName>,
    private readonly clientTools: unknown,
    private readonly clientToolChoice: unknown,
  ) {}

  /** A `function_call` item named as the client knows it; other items unchanged. Mutates `item`. */
  item(item: unknown): void {
    if (!isObject(item) || item["type"] !== "function_call" || typeof item["name"] !== "string") return;
    const owner = this.names.get(item["name"]);
    if (owner === undefined) return;
    item["name"] = owner.name;
    item["namespace"] = owner.namespace;
  }

  /** A response object: its output's calls and the tools it echoes. Mutates `response`. */
  response(response: unknown): void {
    if (!isObject(response)) return;
    const output = response["output"];
    if (Array.isArray(output)) for (const item of output) this.item(item);
    if ("tools" in response) response["tools"] = this.clientTools;
    if ("tool_choice" in response && this.clientToolChoice !== undefined) {
      response["tool_choice"] = this.clientToolChoice;
    }
  }

  /** A whole JSON answer (a response object); the bytes unchanged when they do not parse. */
  body(raw: Buffer): Buffer {
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw.toString("utf8"));
    } catch {
      return raw;
    }
    this.response(parsed);
    return Buffer.from(JSON.stringify(parsed));
  }

  /** Complete SSE events (`event: ...\ndata: {...}\n\n`...): each one that can hold a name, restored. */
  events(region: Buffer): Buffer {
    let parts: Buffer[] | undefined;
    let copied = 0;
    let start = 0;
    while (start < region.length) {
      const endAt = region.indexOf(EVENT_END, start);
      const end = endAt < 0 ? region.length : endAt;
      const rewritten = this.event(region.subarray(start, end));
      if (rewritten !== undefined) {
        parts ??= [];
        parts.push(region.subarray(copied, start), rewritten);
        copied = end;
      }
      start = end + EVENT_END.length;
    }
    if (parts === undefined) return region;
    parts.push(region.subarray(copied));
    return Buffer.concat(parts);
  }

  /** One event's bytes (without its blank line), rewritten; undefined when nothing changes. */
  private event(event: Buffer): Buffer | undefined {
    if (isDelta(event) || !MARKERS.some((marker) => event.includes(marker))) return undefined;
    const dataAt = event.indexOf(DATA_LINE);
    if (dataAt < 0) return undefined;
    const lineEnd = event.indexOf(0x0a /* \n */, dataAt);
    const payloadEnd = lineEnd < 0 ? event.length : lineEnd;
    let data: unknown;
    try {
      data = JSON.parse(event.subarray(dataAt + DATA_LINE.length, payloadEnd).toString("utf8"));
    } catch {
      return undefined;
    }
    if (!isObject(data)) return undefined;
    this.item(data["item"]);
    if ("response" in data) this.response(data["response"]);
    // `response.function_call_arguments.done` names the function too.
    if (typeof data["name"] === "string") {
      const owner = this.names.get(data["name"]);
      if (owner !== undefined) data["name"] = owner.name;
    }
    return Buffer.concat([
      event.subarray(0, dataAt + DATA_LINE.length),
      Buffer.from(JSON.stringify(data)),
      event.subarray(payloadEnd),
    ]);
  }
}

/** A per-token event (`event: response.*.delta`): never holds a name or the tools. */
function isDelta(event: Buffer): boolean {
  if (!event.subarray(0, EVENT_LINE.length).equals(EVENT_LINE)) return false;
  const lineEnd = event.indexOf(0x0a /* \n */);
  const line = event.subarray(0, lineEnd < 0 ? event.length : lineEnd);
  return line.subarray(line.length - DELTA_SUFFIX.length).equals(DELTA_SUFFIX);
}
