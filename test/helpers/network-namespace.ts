// Test fixture: whether tests that need a network namespace run here, and a `test` that skips them (one line
// saying why) where they cannot, as the redis tests skip without redis-server. In CI (CI=true) they never
// skip: there a missing namespace is a failure, reported by the test itself.
import { test } from "vitest";
import { rootNamespaceUnavailable } from "./namespace-availability.js";

export { rootNamespaceUnavailable, userNamespaceUnavailable } from "./namespace-availability.js";

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
