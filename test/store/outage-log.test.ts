// One log line per store outage per replica: a gateway's four Redis links share a server and one StoreOutageLog.
import { describe, expect, it } from "vitest";
import { StoreOutageLog } from "../../src/store/outage-log.js";
import { RedisLink } from "../../src/store/redis-link.js";
import { useRedisServer } from "../helpers/redis-server.js";

const redis = useRedisServer();

function capture() {
  const lines: { level: "warn" | "info"; fields: object; message: string }[] = [];
  return {
    lines,
    logger: {
      warn: (fields: object, message: string) => lines.push({ level: "warn", fields, message }),
      info: (fields: object, message: string) => lines.push({ level: "info", fields, message }),
    },
  };
}

describe("StoreOutageLog", () => {
  it("says the first link down once, and back once the last one is back", () => {
    const { lines, logger } = capture();
    const log = new StoreOutageLog(logger);
    for (const store of ["bindings", "receipts", "budgets", "flows"])
      log.warn(
        { store, err: "ECONNREFUSED" },
        "redis store unreachable or slow: deciding locally until it is back",
      );
    for (const store of ["receipts", "bindings", "flows"]) log.info({ store }, "redis store reachable");
    expect(lines.map((l) => l.level)).toEqual(["warn"]);
    log.info({ store: "budgets" }, "redis store reachable");
    expect(lines.map((l) => l.level)).toEqual(["warn", "info"]);
    // The next outage is a line of its own; a link that comes up without an outage (its first connect) too.
    log.warn({ store: "flows" }, "down");
    log.info({ store: "other" }, "redis store reachable");
    expect(lines.map((l) => `${l.level} ${l.message}`)).toEqual([
      "warn redis store unreachable or slow: deciding locally until it is back",
      "info redis store reachable",
      "warn down",
      "info redis store reachable",
    ]);
  });

  it.skipIf(redis.skip)(
    "four real links through a redis-server restart: one line down, one line back",
    async () => {
      const { lines, logger } = capture();
      const log = new StoreOutageLog(logger);
      const up = new Map<string, boolean>();
      let changed: () => void = () => undefined;
      const until = async (condition: () => boolean): Promise<void> => {
        while (!condition()) await new Promise<void>((resolve) => (changed = resolve));
      };
      const names = ["bindings", "receipts", "budgets", "flows"];
      const links = names.map(
        (name) =>
          new RedisLink({
            url: redis.server.url,
            timeoutMs: 200,
            name,
            scripts: [],
            logger: log,
            health: {
              up: (isUp) => {
                up.set(name, isUp);
                changed();
              },
              error: () => undefined,
            },
          }),
      );
      try {
        await until(() => names.every((n) => up.get(n) === true));
        const before = lines.length;
        const restarted = redis.server.restart();
        await until(() => names.every((n) => up.get(n) === false) || lines.length > before + 1);
        await restarted;
        await until(() => names.every((n) => up.get(n) === true));
        const outage = lines.slice(before).map((l) => `${l.level} ${l.message}`);
        expect(outage).toEqual([
          "warn redis store unreachable or slow: deciding locally until it is back",
          "info redis store reachable",
        ]);
      } finally {
        await Promise.all(links.map((link) => link.close()));
      }
    },
    60_000,
  );
});
