// The replicas study end to end in quick mode: gateway processes, a real redis-server, memory vs redis store.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { silentProgress } from "../../src/study/progress.js";
import { PHASES, runReplicasStudy, type StoreNumbers } from "../../src/study/studies/replicas.js";
import { redisAvailable } from "../helpers/redis-server.js";

const redisTool = redisAvailable();
const options = { seed: 42, timeScale: 10, quick: true, runId: "test", progress: silentProgress };

describe("replicas study", () => {
  it.skipIf(redisTool.skip)(
    "with redis every turn stays on its previous engine except forced moves; with memory sessions scatter",
    async () => {
      const result = await runReplicasStudy(options);
      const data = result.data as Record<"memory" | "redis", StoreNumbers>;
      const sessions = 12;
      for (const store of ["memory", "redis"] as const) {
        const r = data[store];
        // 12 rounds of 12 sessions, plus the two turns that met the 503; all served.
        expect(r.requests).toBe(12 * sessions + 2);
        expect(r.failed).toBe(0);
        // Every turn but each session's first has a previous turn to compare with.
        expect(r.turns).toBe(r.requests - sessions);
        expect(r.kept + r.forced + r.unforced).toBe(r.turns);
        expect(Object.keys(r.phases)).toEqual([...PHASES]);
        expect(r.heldByDead).toBeGreaterThan(0);
      }
      const { memory, redis } = data;
      // A store call slower than timeout_ms fails open (that replica decides alone, and may move a session):
      // on a loaded machine it happens now and then, is counted, and is then the only excuse for a move.
      expect(redis.unforced).toBeLessThanOrEqual(redis.storeErrors);
      expect(redis.forced).toBe(2 + redis.heldByDead);
      expect(redis.kept).toBe(redis.turns - redis.forced - redis.unforced);
      expect(redis.broken).toBe(2 + redis.heldByDead);
      // The memory store: replicas that did not see a move keep sending the session back.
      expect(memory.unforced).toBeGreaterThan(0);
      expect(memory.kept).toBeLessThan(redis.kept);
      expect(memory.phases["replica restart"].unforced).toBeGreaterThan(0);
      const excused = (claim: string): boolean =>
        redis.storeErrors > 0 && /^redis: (every turn|no store call)/.test(claim);
      expect(result.checks.filter((c) => !c.passed && !excused(c.claim))).toEqual([]);
      expect(result.charts.map((c) => c.file)).toEqual([
        "replicas-continuity.svg",
        "replicas-prefix-cache.svg",
      ]);
      expect(result.records).toHaveLength(2 * (12 * sessions + 2));
    },
    120_000,
  );

  it("fails with a clear message when redis-server is not on PATH", async () => {
    const path = process.env["PATH"];
    const empty = await mkdtemp(join(tmpdir(), "no-redis-"));
    process.env["PATH"] = empty;
    try {
      await expect(runReplicasStudy(options)).rejects.toThrow(
        /needs a redis-server: redis-server is not on PATH/,
      );
    } finally {
      process.env["PATH"] = path;
      await rm(empty, { recursive: true, force: true });
    }
  });
});
