// Test fixture: whether tests that need a network namespace run here, and a `test` that skips them (one line
// saying why) where they cannot, as the redis tests skip without redis-server. In CI (CI=true) they never
// skip: there a missing namespace is a failure, reported by the test itself.
import { spawnSync } from "node:child_process";
import { test } from "vitest";

function missingTool(tools: readonly string[]): string | undefined {
  for (const tool of tools) {
    const found = spawnSync("sh", ["-c", `command -v ${tool}`], { encoding: "utf8" });
    if (found.status !== 0) return `'${tool}' is not installed (util-linux and iproute2 are needed)`;
  }
  return undefined;
}

/**
 * Why a loopback-only namespace entered as root (`unshare -n`, processes joined with `nsenter`: the
 * coding-agent tests) cannot be made here, or undefined.
 */
export function rootNamespaceUnavailable(): string | undefined {
  if (process.platform !== "linux") return `network namespaces need Linux (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return "unshare -n needs root (CI runs as root)";
  return missingTool(["unshare", "nsenter", "ip"]);
}

/** Why an unprivileged one (`unshare -rn`, through a user namespace: the container tests) cannot, or undefined. */
export function userNamespaceUnavailable(): string | undefined {
  if (process.platform !== "linux") return `network namespaces need Linux (this is ${process.platform})`;
  const missing = missingTool(["unshare", "ip"]);
  if (missing !== undefined) return missing;
  const tried = spawnSync("unshare", ["-rn", "ip", "link", "set", "lo", "up"], { encoding: "utf8" });
  return tried.status === 0
    ? undefined
    : `unshare -rn failed (${tried.stderr.trim() || `exit ${tried.status}`}): unprivileged user namespaces are off`;
}

/** Whether to skip: `why` is set and this is not CI. Says so in one line (what is skipped, and why). */
export function skipWithoutNamespace(what: string, why: string | undefined): boolean {
  const skip = why !== undefined && process.env["CI"] !== "true";
  if (skip) console.warn(`skipping ${what}: ${why}`);
  return skip;
}

/** `test` for the coding-agent tests: skipped, with one line, where `unshare -n` cannot run. */
export const namespaceTest = test.skipIf(
  skipWithoutNamespace("the tests that need a network namespace (unshare -n)", rootNamespaceUnavailable()),
);
