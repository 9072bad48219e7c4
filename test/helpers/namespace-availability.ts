// Whether a network namespace can be made here, and why not (no vitest: test/test-packages.ts reads it too).
import { spawnSync } from "node:child_process";

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
