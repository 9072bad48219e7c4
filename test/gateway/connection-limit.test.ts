// The default client-connection cap comes from the open-file limit read at start.
import { describe, expect, it } from "vitest";
import { defaultMaxConnections, openFileLimit } from "../../src/gateway/connection-limit.js";

const LIMITS = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            1024                 524288               files
Max locked memory         8388608              8388608              bytes
`;

describe("connection limit", () => {
  it("reads the soft open-file limit from /proc/self/limits text, undefined when unreadable or unlimited", () => {
    expect(openFileLimit(() => LIMITS)).toBe(1024);
    expect(openFileLimit(() => LIMITS.replace("1024 ", "unlimited "))).toBeUndefined();
    expect(
      openFileLimit(() => {
        throw new Error("ENOENT");
      }),
    ).toBeUndefined();
    expect(openFileLimit()).toBeGreaterThan(0); // this Linux test machine has the file
  });

  it("stays well under the limit after the engine connections, and within 16-10,000", () => {
    expect(defaultMaxConnections(1024, 66)).toBe(804); // (1024 - 66 - 64) * 0.9
    expect(defaultMaxConnections(256, 66)).toBe(113);
    expect(defaultMaxConnections(100, 200)).toBe(16);
    expect(defaultMaxConnections(1_048_576, 66)).toBe(10_000);
    expect(defaultMaxConnections(undefined, 66)).toBe(10_000);
  });
});
