// Temporary directories a test file makes, removed once its tests are done: a run of the suite leaves nothing in
// the system's temp folder (it left a dozen directories of configs and reports per run).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";

/**
 * Call at the top of a test file (before its other hooks, so that its removal runs after theirs: processes using a
 * directory are stopped first). Returns what makes a directory under the temp folder, named `prefix` + random.
 */
export function useTempDirs(): (prefix: string) => Promise<string> {
  const made: string[] = [];
  afterAll(async () => {
    await Promise.all(made.splice(0).map((dir) => rm(dir, { recursive: true, force: true })));
  });
  return async (prefix) => {
    const dir = await mkdtemp(join(tmpdir(), prefix));
    made.push(dir);
    return dir;
  };
}
