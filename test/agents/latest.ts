// `npm run agents:latest`: installs the newest release of every coding-agent CLI from the registry into a temporary
// directory and runs the agent tests against them, one file at a time (as root, like the pinned run), so a release
// that breaks the gateway shows before users meet it. The pins in test/agents/package.json stay as they are.
import { spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const AGENTS_DIR = fileURLToPath(new URL(".", import.meta.url));
const REPO_ROOT = fileURLToPath(new URL("../../", import.meta.url));

const pinned = JSON.parse(readFileSync(join(AGENTS_DIR, "package.json"), "utf8")) as {
  dependencies: Record<string, string>;
};
const names = Object.keys(pinned.dependencies);
const dir = mkdtempSync(join(tmpdir(), "agent-serve-agents-latest-"));
let failed = 0;
try {
  writeFileSync(
    join(dir, "package.json"),
    JSON.stringify({
      private: true,
      dependencies: Object.fromEntries(names.map((name) => [name, "latest"])),
    }),
  );
  // no install scripts: the tests start each CLI's platform binary or script directly
  const install = spawnSync(
    "npm",
    ["install", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
    {
      cwd: dir,
      stdio: "inherit",
    },
  );
  if (install.status !== 0) throw new Error(`npm install of the newest CLIs failed (${install.status})`);
  for (const name of names) {
    const { version } = JSON.parse(readFileSync(join(dir, "node_modules", name, "package.json"), "utf8")) as {
      version: string;
    };
    process.stdout.write(`${name} ${version} (pinned ${pinned.dependencies[name]})\n`);
  }
  const files = readdirSync(AGENTS_DIR).filter((file) => file.endsWith(".test.ts"));
  for (const file of files) {
    const run = spawnSync("npx", ["vitest", "run", join("test", "agents", file)], {
      cwd: REPO_ROOT,
      stdio: "inherit",
      env: { ...process.env, AGENT_CLIS_DIR: join(dir, "node_modules") },
    });
    if (run.status !== 0) failed += 1;
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.stdout.write(
  failed === 0 ? "every agent test passed at the newest releases\n" : `${failed} test file(s) failed\n`,
);
process.exit(failed === 0 ? 0 : 1);
