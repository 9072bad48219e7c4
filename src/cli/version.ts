// The package's version, read from its package.json (found upwards from this file, compiled or not).
import { readFileSync } from "node:fs";

/** `dist/src/cli/version.js` and `src/cli/version.ts` sit two or three folders below package.json. */
export function packageVersion(): string {
  for (const up of ["../../package.json", "../../../package.json"]) {
    try {
      const manifest = JSON.parse(readFileSync(new URL(up, import.meta.url), "utf8")) as {
        name?: unknown;
        version?: unknown;
      };
      if (manifest.name === "agent-serve" && typeof manifest.version === "string") return manifest.version;
    } catch {
      // not at this level
    }
  }
  return "unknown";
}
