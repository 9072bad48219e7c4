// Finds a program on PATH (redis-server, prometheus, kubectl) without running a shell.
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";

/** The absolute path of an executable on PATH, or undefined. */
export function findExecutable(name: string): string | undefined {
  for (const dir of (process.env["PATH"] ?? "").split(delimiter)) {
    if (dir === "") continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}
