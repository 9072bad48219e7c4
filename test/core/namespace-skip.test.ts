// The namespace tests' skip (test/helpers/network-namespace.ts): one line and a skip outside CI, never in CI.
import { afterEach, describe, expect, it, vi } from "vitest";
import { rootNamespaceUnavailable, skipWithoutNamespace } from "../helpers/network-namespace.js";

describe("skipping the tests that need a network namespace", () => {
  afterEach(() => {
    vi.unstubAllEnvs();
    vi.restoreAllMocks();
  });

  it("skips with one line saying what and why where the namespace cannot be made, outside CI", () => {
    vi.stubEnv("CI", "");
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    expect(skipWithoutNamespace("the agent tests", "unshare -n needs root")).toBe(true);
    expect(warn.mock.calls).toEqual([["skipping the agent tests: unshare -n needs root"]]);
  });

  it("never skips in CI (a missing namespace fails there) nor where it can be made", () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    vi.stubEnv("CI", "true");
    expect(skipWithoutNamespace("the agent tests", "unshare -n needs root")).toBe(false);
    vi.stubEnv("CI", "");
    expect(skipWithoutNamespace("the agent tests", undefined)).toBe(false);
    expect(warn).not.toHaveBeenCalled();
  });

  it("asks for root for unshare -n", () => {
    const uid = vi.spyOn(process as unknown as { getuid(): number }, "getuid").mockReturnValue(1000);
    expect(rootNamespaceUnavailable()).toBe(
      process.platform === "linux" ? "unshare -n needs root (CI runs as root)" : expect.any(String),
    );
    expect(uid).toHaveBeenCalled();
  });
});
