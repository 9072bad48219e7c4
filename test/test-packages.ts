// `npm test`'s first step (the pretest script): installs the test-only packages of their own, kept out of the
// root package so a user's `npm ci` stays small and prints no engine warning.
// - test/clients (the newest client SDK majors, ~150 MB): always, since the typecheck reads their types.
// - test/agents (the coding-agent CLIs, ~1 GB): only where their tests run (root, with unshare: see
//   test/helpers/network-namespace.ts); elsewhere those tests skip and the install would be wasted.
// A folder is installed when its node_modules is missing or older than its lock (a pull moved a pin); otherwise
// nothing is done, so CI (.ci/run installs both first) pays nothing here.
import { spawnSync } from "node:child_process";
import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import { rootNamespaceUnavailable } from "./helpers/namespace-availability.js";

const REPO_ROOT = join(import.meta.dirname, "..");

/** Whether `folder`'s installed tree is missing or older than its lock. */
function needsInstall(folder: string): boolean {
  const installed = join(folder, "node_modules", ".package-lock.json");
  return (
    !existsSync(installed) ||
    statSync(installed).mtimeMs < statSync(join(folder, "package-lock.json")).mtimeMs
  );
}

function install(folder: string, what: string): void {
  console.warn(`npm test: installing ${what} (npm ci --prefix ${folder}), once`);
  // --loglevel=error: these packages declare node>=22 yet run here (docs/clients.md, docs/clients-coding-agents.md).
  const done = spawnSync(
    "npm",
    ["ci", "--prefix", folder, "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
    { cwd: REPO_ROOT, stdio: "inherit" },
  );
  if (done.status !== 0) {
    console.error(`npm test: could not install ${folder} (exit ${done.status ?? done.signal})`);
    process.exit(1);
  }
}

const clients = join("test", "clients");
if (needsInstall(join(REPO_ROOT, clients)))
  install(clients, "the newest client SDK majors the client tests run");

const agents = join("test", "agents");
if (rootNamespaceUnavailable() === undefined && needsInstall(join(REPO_ROOT, agents)))
  install(agents, "the coding-agent CLIs the agent tests run");
