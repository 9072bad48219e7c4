// The study's interrupt guard in a real process: SIGINT runs the registered kills, then ends the process by it.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, expect, it } from "vitest";

const GUARD = pathToFileURL(fileURLToPath(new URL("../../src/study/interrupt-guard.ts", import.meta.url)));

describe("InterruptGuard", () => {
  it("on SIGINT runs every kill still registered, then the process dies of the signal", async () => {
    const dir = await mkdtemp(join(tmpdir(), "interrupt-guard-"));
    try {
      const script = join(dir, "guarded.ts");
      await writeFile(
        script,
        `import { writeFileSync } from "node:fs";
import { InterruptGuard } from ${JSON.stringify(GUARD.href)};
const guard = new InterruptGuard();
guard.add(() => writeFileSync(${JSON.stringify(join(dir, "first"))}, "killed"));
guard.add(() => { throw new Error("a kill that fails"); });
guard.add(() => writeFileSync(${JSON.stringify(join(dir, "after-failure"))}, "killed"));
const removed = guard.add(() => writeFileSync(${JSON.stringify(join(dir, "removed"))}, "killed"));
removed();
process.stdout.write("ready\\n");
setInterval(() => undefined, 1000);
`,
      );
      const child = spawn(process.execPath, ["--import", "tsx", script], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        child.once("exit", (code, signal) => resolve({ code, signal })),
      );
      await new Promise<void>((resolve) =>
        child.stdout.on("data", (chunk: Buffer) => {
          if (chunk.toString().includes("ready")) resolve();
        }),
      );
      child.kill("SIGINT");
      expect(await exited).toEqual({ code: null, signal: "SIGINT" });
      expect(readFileSync(join(dir, "first"), "utf8")).toBe("killed");
      expect(readFileSync(join(dir, "after-failure"), "utf8")).toBe("killed");
      expect(existsSync(join(dir, "removed"))).toBe(false);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 20_000);
});
