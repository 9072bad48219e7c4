// Server-sent events as the continuation reads and writes them: one event's name and data, parsed from complete
// events (what a relay hands the client) and written back.

export interface SseEvent {
  /** The `event:` line's value; undefined for data-only events (chat and completions). */
  readonly name: string | undefined;
  /** The `data:` lines, joined. */
  readonly data: string;
}

/** The events of `text`, which holds whole events (each ended by a blank line); a partial tail is ignored. */
export function parseEvents(text: string): SseEvent[] {
  const events: SseEvent[] = [];
  let at = 0;
  for (let end = text.indexOf("\n\n", at); end >= 0; end = text.indexOf("\n\n", at)) {
    const event = parseEvent(text.slice(at, end));
    if (event !== undefined) events.push(event);
    at = end + 2;
  }
  return events;
}

function parseEvent(block: string): SseEvent | undefined {
  let name: string | undefined;
  const data: string[] = [];
  for (const line of block.split("\n")) {
    if (line.startsWith("event:")) name = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(line.startsWith("data: ") ? 6 : 5));
  }
  return name === undefined && data.length === 0 ? undefined : { name, data: data.join("\n") };
}

/** The event's data as JSON, or undefined (`[DONE]`, or not JSON). */
export function dataJson(event: SseEvent): unknown {
  if (event.data === "[DONE]") return undefined;
  try {
    return JSON.parse(event.data) as unknown;
  } catch {
    return undefined;
  }
}

/** One event, as engines write them: `event:` (when named) and one `data:` line. */
export function formatEvent(name: string | undefined, payload: unknown): Buffer {
  const data = typeof payload === "string" ? payload : JSON.stringify(payload);
  return Buffer.from(name === undefined ? `data: ${data}\n\n` : `event: ${name}\ndata: ${data}\n\n`);
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
