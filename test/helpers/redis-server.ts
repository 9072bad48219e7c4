// Test fixture: whether the redis tests run here, and the redis-server starter they share with the study.
import { REDIS_SERVER_MISSING, findRedisServer } from "../../src/store/redis-server.js";

export { startRedisServer, type RedisServer } from "../../src/store/redis-server.js";

/** Whether redis tests run: in CI (CI=true) a missing binary is a failure, locally they are skipped. */
export function redisAvailable(): { path: string | undefined; skip: boolean } {
  const path = findRedisServer();
  const skip = path === undefined && process.env["CI"] !== "true";
  if (skip) console.warn(`skipping the tests that need redis-server: ${REDIS_SERVER_MISSING}`);
  return { path, skip };
}
