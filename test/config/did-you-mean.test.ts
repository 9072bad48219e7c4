// An unknown config key is reported with the known key it most likely meant, found in the schema at its place.
import { describe, expect, it } from "vitest";
import { closestKey, editDistance, knownKeysAt } from "../../src/config/did-you-mean.js";
import { ConfigError, parseConfig } from "../../src/config/load.js";
import { gatewayConfigSchema } from "../../src/config/schema.js";

const BACKEND = { id: "a", tier: "small", base_url: "http://127.0.0.1:8001", model: "m" };

function problems(document: Record<string, unknown>): string[] {
  try {
    parseConfig({ backends: [BACKEND], ...document }, "test.yaml");
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

describe("did you mean", () => {
  it("names the key a misspelt one most likely meant, wherever it sits", () => {
    expect(problems({ server: { prot: 8000 } })).toEqual(["server.prot: unknown key (did you mean 'port'?)"]);
    expect(problems({ affinity: { sticky_ttl_secnods: 10 } })).toEqual([
      "affinity.sticky_ttl_secnods: unknown key (did you mean 'sticky_ttl_seconds'?)",
    ]);
    expect(problems({ backends: [{ ...BACKEND, max_inflite: 3 }] })).toEqual([
      "backends[0].max_inflite: unknown key (did you mean 'max_inflight'?)",
    ]);
    expect(problems({ sever: {} })).toEqual(["sever: unknown key (did you mean 'server'?)"]);
    expect(
      problems({ admission: { store: { kind: "redis", url: "redis://127.0.0.1:6379", timeout: 50 } } }),
    ).toEqual(["admission.store.timeout: unknown key (did you mean 'timeout_ms'?)"]);
  });

  it("suggests nothing when no known key is close", () => {
    expect(problems({ affinity: { zzzzzzzz: 1 } })).toEqual(["affinity.zzzzzzzz: unknown key"]);
  });

  it("reads the known keys from the schema", () => {
    expect(knownKeysAt(gatewayConfigSchema, [])).toEqual(expect.arrayContaining(["server", "backends"]));
    expect(knownKeysAt(gatewayConfigSchema, ["server"])).toEqual(
      expect.arrayContaining(["host", "api_keys"]),
    );
    expect(knownKeysAt(gatewayConfigSchema, ["backends", 0])).toContain("base_url");
    expect(editDistance("abcd", "abdc")).toBe(1);
    expect(closestKey("Port", ["port", "host"])).toBe("port");
    expect(closestKey("log-prompts", ["log_prompts"])).toBe("log_prompts");
  });
});
