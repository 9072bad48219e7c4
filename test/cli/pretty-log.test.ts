// The log for a person at a terminal: short lines, chosen by server.log_format or by whether stdout is a TTY.
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../src/config/load.js";
import { prettyDestination, prettyLine } from "../../src/cli/pretty-log.js";
import { logFormat } from "../../src/cli/run-gateway.js";

describe("pretty log", () => {
  it("writes time, level, message and the other members as key=value", () => {
    const time = new Date(2026, 11, 5, 9, 3, 4, 56).getTime();
    const line = JSON.stringify({
      level: 40,
      time,
      pid: 1,
      hostname: "h",
      name: "agent-serve",
      msg: "store unavailable",
      store: "affinity",
      error: "connect ECONNREFUSED 127.0.0.1:6379",
      attempts: 2,
    });
    expect(prettyLine(line)).toBe(
      '09:03:04.056 WARN  store unavailable store=affinity error="connect ECONNREFUSED 127.0.0.1:6379" attempts=2',
    );
    expect(prettyLine("not json")).toBe("not json");
  });

  it("is what a pino logger writes through prettyDestination", () => {
    const lines: string[] = [];
    const logger = pino(
      { name: "agent-serve" },
      prettyDestination((text) => lines.push(text)),
    );
    logger.info({ url: "http://127.0.0.1:8000" }, "agent-serve gateway listening on 127.0.0.1:8000");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(
      /^\d\d:\d\d:\d\d\.\d{3} INFO {2}agent-serve gateway listening on 127\.0\.0\.1:8000 url=http:\/\/127\.0\.0\.1:8000\n$/,
    );
  });

  it("is chosen by server.log_format, else pretty on a terminal and json off one", () => {
    const backends = [{ id: "a", tier: "t", base_url: "http://127.0.0.1:1", model: "m" }];
    expect(parseConfig({ backends }, "t").server.log_format).toBeUndefined();
    expect(parseConfig({ server: { log_format: "json" }, backends }, "t").server.log_format).toBe("json");
    expect(() => parseConfig({ server: { log_format: "fancy" }, backends }, "t")).toThrow(
      /server\.log_format: must be pretty or json/,
    );
    expect(logFormat(undefined, true)).toBe("pretty");
    expect(logFormat(undefined, false)).toBe("json");
    expect(logFormat("json", true)).toBe("json");
    expect(logFormat("pretty", false)).toBe("pretty");
  });
});
