// SGLang's cache-aware policy: the imbalance test (both thresholds), the cache threshold, the smallest tree.
import { describe, expect, it } from "vitest";
import {
  SGLANG_DEFAULTS,
  SglangCacheAwarePolicy,
} from "../../../src/affinity/policies/sglang-cache-aware.js";
import { candidate } from "./candidates.js";

const NONE: ReadonlySet<string> = new Set();
const req = (text: string, exclude: ReadonlySet<string> = NONE) => ({
  tier: "small",
  text,
  promptBytes: text,
  exclude,
});

describe("SglangCacheAwarePolicy", () => {
  it("has sgl-router's defaults", () => {
    expect(SGLANG_DEFAULTS).toMatchObject({
      cacheThreshold: 0.5,
      balanceAbsThreshold: 32,
      balanceRelThreshold: 1.0001,
    });
  });

  it("sends new text to the smallest tree and repeated text to the backend that has it", () => {
    const policy = new SglangCacheAwarePolicy();
    const idle = [candidate("e0"), candidate("e1")];
    const x = "x".repeat(100);
    expect(policy.select(req(x), idle, 0)).toMatchObject({ backend: { id: "e0" }, reason: "smallest_tree" });
    expect(policy.select(req(x), idle, 1)).toMatchObject({ backend: { id: "e0" }, reason: "cache_match" });
    // Nothing in common: e1's tree (empty) is the smaller.
    const y = "y".repeat(100);
    expect(policy.select(req(y), idle, 2)).toMatchObject({ backend: { id: "e1" }, reason: "smallest_tree" });
    expect(policy.tree("small").sizeOf("e0")).toBe(100);
    expect(policy.tree("small").sizeOf("e1")).toBe(100);
  });

  it("takes the match only above cache_threshold: exactly 0.5 is a miss", () => {
    const policy = new SglangCacheAwarePolicy();
    const idle = [candidate("e0"), candidate("e1")];
    policy.select(req("x".repeat(100)), idle, 0); // e0
    policy.select(req("w".repeat(120)), idle, 1); // e1, now the larger tree
    // 50 of 100 characters match e0's text: not above 0.5, so the smallest tree (e0: 100 < e1: 120).
    expect(policy.select(req("x".repeat(50) + "z".repeat(50)), idle, 2)).toMatchObject({
      reason: "smallest_tree",
    });
    // 51 of 100: above, e0 by its match.
    expect(policy.select(req("x".repeat(51) + "q".repeat(49)), idle, 3)).toMatchObject({
      backend: { id: "e0" },
      reason: "cache_match",
    });
  });

  it("goes to the least loaded backend only when both imbalance thresholds are exceeded", () => {
    const policy = new SglangCacheAwarePolicy();
    const x = "x".repeat(100);
    policy.select(req(x), [candidate("e0"), candidate("e1")], 0); // e0 holds x
    // max - min = 35 > 32 and 40 > 5 x 1.0001: imbalanced, the cache is ignored.
    const imbalanced = [candidate("e0", { inflight: 30, queued: 10 }), candidate("e1", { inflight: 5 })];
    expect(policy.select(req(x), imbalanced, 1)).toMatchObject({
      backend: { id: "e1" },
      reason: "least_load",
    });
    // max - min = 32: not above the absolute threshold, so the cache decides. Both trees hold x now (the
    // imbalanced branch inserts too); the match goes to the most recent holder, e1, however loaded.
    const within = [candidate("e0", { inflight: 8 }), candidate("e1", { inflight: 40 })];
    expect(policy.select(req(x), within, 2)).toMatchObject({ backend: { id: "e1" }, reason: "cache_match" });
    // The relative threshold must be exceeded as well: 100 vs 67 with rel 1.5 is balanced.
    const relaxed = new SglangCacheAwarePolicy({ ...SGLANG_DEFAULTS, balanceRelThreshold: 1.5 });
    relaxed.select(req(x), [candidate("e0"), candidate("e1")], 0);
    const spread = [candidate("e0", { inflight: 100 }), candidate("e1", { inflight: 67 })];
    expect(relaxed.select(req(x), spread, 1)).toMatchObject({ backend: { id: "e0" }, reason: "cache_match" });
  });

  it("falls back to the first healthy backend when its choice is down or excluded", () => {
    const policy = new SglangCacheAwarePolicy();
    const x = "x".repeat(100);
    policy.select(req(x), [candidate("e0"), candidate("e1")], 0);
    expect(policy.select(req(x), [candidate("e0", { state: "down" }), candidate("e1")], 1)).toMatchObject({
      backend: { id: "e1" },
    });
    expect(policy.select(req(x), [candidate("e0"), candidate("e1")], 2)?.backend.id).toBe("e0");
    expect(policy.select(req(x, new Set(["e0"])), [candidate("e0"), candidate("e1")], 3)?.backend.id).toBe(
      "e1",
    );
    expect(policy.select(req(x), [candidate("e0", { state: "down" })], 4)).toBeUndefined();
  });

  it("cuts every tree back to max_tree_chars once per eviction interval, on the injected clock", () => {
    const policy = new SglangCacheAwarePolicy({
      ...SGLANG_DEFAULTS,
      evictionIntervalMs: 1000,
      maxTreeChars: 150,
    });
    const idle = [candidate("e0")];
    policy.select(req("a".repeat(100)), idle, 0);
    policy.select(req("b".repeat(100)), idle, 10);
    expect(policy.tree("small").sizeOf("e0")).toBe(200);
    policy.select(req("b".repeat(100)), idle, 999);
    expect(policy.tree("small").sizeOf("e0")).toBe(200);
    policy.select(req("b".repeat(100)), idle, 1000);
    // The least recently used leaf ("a...") went.
    expect(policy.tree("small").sizeOf("e0")).toBe(100);
    expect(policy.tree("small").prefixMatch("a".repeat(100), 1001).matchedChars).toBe(0);
  });
});
