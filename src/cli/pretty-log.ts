// The gateway's log for a person at a terminal: one short line per record instead of a JSON object.

const LEVELS: Record<number, string> = {
  10: "TRACE",
  20: "DEBUG",
  30: "INFO ",
  40: "WARN ",
  50: "ERROR",
  60: "FATAL",
};

/** Members every line has, or that the line's layout already shows. */
const SHOWN_OR_NOISE = new Set(["level", "time", "msg", "pid", "hostname", "name", "v"]);

function valueText(value: unknown): string {
  if (typeof value === "string") return /[\s"=]/.test(value) ? JSON.stringify(value) : value;
  return JSON.stringify(value);
}

/**
 * `12:03:04.567 INFO  agent-serve gateway listening on 127.0.0.1:8000 url=http://... backends=[...]`: the time
 * (local), the level, the message, then every other member as key=value. A line that is not a JSON object
 * is passed on as it is.
 */
export function prettyLine(line: string): string {
  let record: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(line);
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) return line;
    record = parsed as Record<string, unknown>;
  } catch {
    return line;
  }
  const time = typeof record["time"] === "number" ? new Date(record["time"]) : undefined;
  const clock =
    time === undefined
      ? ""
      : `${[time.getHours(), time.getMinutes(), time.getSeconds()].map((n) => String(n).padStart(2, "0")).join(":")}.${String(time.getMilliseconds()).padStart(3, "0")} `;
  const level = LEVELS[record["level"] as number] ?? String(record["level"] ?? "");
  const rest = Object.entries(record)
    .filter(([key]) => !SHOWN_OR_NOISE.has(key))
    .map(([key, value]) => `${key}=${valueText(value)}`);
  return [`${clock}${level}`, String(record["msg"] ?? ""), ...rest].filter((part) => part !== "").join(" ");
}

/** A stream for pino that writes each record as prettyLine to `write` (a terminal: synchronous is fine). */
export function prettyDestination(write: (text: string) => void): { write(chunk: string): void } {
  return {
    write(chunk) {
      for (const line of chunk.split("\n")) if (line !== "") write(`${prettyLine(line)}\n`);
    },
  };
}
