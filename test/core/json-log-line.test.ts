// The request line written whole (src/core/json-log-line.ts) is the line pino writes for the same fields.
import { Writable } from "node:stream";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { logInfoLine, markDefaultFormat } from "../../src/core/json-log-line.js";

function capture(): { lines: string[]; stream: Writable } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { lines, stream };
}

const FIELDS = {
  reqId: "r-1",
  method: "POST",
  status: 200,
  ms: 1.2,
  session: 'quote " and \\ and\nline',
  agent: undefined,
  hit: true,
  attempts: undefined,
  adapted: ["tools"],
  bad: Number.NaN,
};

/** Lines with pino's time replaced (the two lines are written a moment apart). */
const timeless = (line: string): string => line.replace(/"time":\d+/, '"time":0');

describe("logInfoLine", () => {
  it("writes the line pino writes, byte for byte, for a logger marked as having the default format", async () => {
    const { lines, stream } = capture();
    const logger = markDefaultFormat(pino({ name: "agent-serve", level: "info" }, stream));
    logger.info(FIELDS, "request");
    logInfoLine(logger, FIELDS, "request");
    logInfoLine(logger, { only: undefined }, "empty");
    logger.info({ only: undefined }, "empty");
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines).toHaveLength(4);
    expect(timeless(lines[1]!)).toBe(timeless(lines[0]!));
    expect(timeless(lines[2]!)).toBe(timeless(lines[3]!));
    expect(JSON.parse(lines[1]!)).toMatchObject({ level: 30, name: "agent-serve", reqId: "r-1", bad: null });
  });

  it("writes nothing below the logger's level, and leaves other loggers to pino", async () => {
    const quiet = capture();
    logInfoLine(markDefaultFormat(pino({ level: "warn" }, quiet.stream)), FIELDS, "request");
    const other = capture();
    const custom = pino({ mixin: () => ({ extra: 1 }) }, other.stream);
    logInfoLine(custom, FIELDS, "request");
    await new Promise((resolve) => setImmediate(resolve));
    expect(quiet.lines).toEqual([]);
    expect(JSON.parse(other.lines[0]!)).toMatchObject({ extra: 1, reqId: "r-1", msg: "request" });
  });
});
