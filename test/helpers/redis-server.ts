// Test fixture: whether the redis tests run here, and the redis-server starter they share with the study.
import { afterAll, beforeAll } from "vitest";
import { RedisLink, type LuaScript } from "../../src/store/redis-link.js";
import {
  REDIS_SERVER_MISSING,
  findRedisServer,
  startRedisServer,
  type RedisServer,
} from "../../src/store/redis-server.js";

export { startRedisServer, type RedisServer };

/** Whether redis tests run: in CI (CI=true) a missing binary is a failure, locally they are skipped. */
export function redisAvailable(): { path: string | undefined; skip: boolean } {
  const path = findRedisServer();
  const skip = path === undefined && process.env["CI"] !== "true";
  if (skip) console.warn(`skipping the tests that need redis-server: ${REDIS_SERVER_MISSING}`);
  return { path, skip };
}

/** A redis-server of the test file's own: started before its tests, stopped after them. */
export interface TestRedis {
  /** No redis-server here, and not in CI: the file's redis tests skip. */
  readonly skip: boolean;
  /** The running server (only inside tests that do not skip). */
  readonly server: RedisServer;
}

/**
 * Starts a redis-server before the file's tests (on an OS-assigned port) and stops it after them, once
 * `beforeStop` (closing the file's own clients) is done. Call at the top level of a test file.
 */
export function useRedisServer(beforeStop?: () => Promise<void>): TestRedis {
  const { path, skip } = redisAvailable();
  let running: RedisServer | undefined;
  beforeAll(async () => {
    if (!skip) running = await startRedisServer(path!);
  }, 30_000);
  afterAll(async () => {
    await beforeStop?.();
    await running?.stop();
  });
  return {
    skip,
    get server(): RedisServer {
      if (running === undefined) throw new Error("redis-server is not running (skipped, or outside a test)");
      return running;
    },
  };
}

/** A RedisLink as the store tests use it: nothing logged, health reports dropped. */
export function quietRedisLink(
  url: string,
  scripts: readonly LuaScript[],
  timeoutMs: number,
  name = "test",
): RedisLink {
  return new RedisLink({
    url,
    timeoutMs,
    name,
    scripts,
    logger: { warn: () => undefined, info: () => undefined },
    health: { up: () => undefined, error: () => undefined },
  });
}
