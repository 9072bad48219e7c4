// The scheduler with affinity.policy set: the policy places every request, sessions ignored, nothing bound.
import { describe, expect, it } from "vitest";
import {
  createPolicy,
  LLMD_CONFIG_DEFAULTS,
  SGLANG_CONFIG_DEFAULTS,
} from "../../../src/affinity/policies/create-policy.js";
import { MemoryBindingStore } from "../../../src/affinity/memory-bindings.js";
import { PlacementService } from "../../../src/affinity/placement-service.js";
import { createBalancer } from "../../../src/affinity/balancers.js";
import { StickyTable } from "../../../src/affinity/sticky-table.js";
import { ManualClock } from "../../../src/core/clock.js";
import { SeededRandom } from "../../../src/core/random.js";
import { CountingRecorder } from "../helpers.js";
import { candidate } from "./candidates.js";

const config = (policy: "hrw" | "sglang_cache_aware" | "llmd_scorers", threshold = 0.5) => ({
  policy,
  sglang: { ...SGLANG_CONFIG_DEFAULTS, cache_threshold: threshold },
  llmd: LLMD_CONFIG_DEFAULTS,
});

function scheduler(policy: ReturnType<typeof createPolicy>) {
  const store = new StickyTable(1000, [1, 2]);
  const recorder = new CountingRecorder();
  const s = new PlacementService({
    store: new MemoryBindingStore(store),
    clock: new ManualClock(0),
    balancer: createBalancer("least_inflight", new SeededRandom(1)),
    recorder,
    stickyTtlMs: 1_800_000,
    loadFactor: 1.25,
    sessionless: "prefix",
    policy,
  });
  return { s, store, recorder };
}

const hints = (text: string) => ({ prefixKey: undefined, routingText: text, promptBytes: text });

describe("PlacementService with a policy", async () => {
  it("lets the SGLang policy place sessions by their text: no binding, a miss, the policy's reason", async () => {
    const { s, store, recorder } = scheduler(
      createPolicy(config("sglang_cache_aware"), new SeededRandom(1), 0),
    );
    const backends = [candidate("e0"), candidate("e1")];
    const text = "t".repeat(200);
    const first = await s.place("session-a", "small", backends, new Set(), hints(text));
    expect(first).toMatchObject({ backend: { id: "e0" }, affinityHit: false, reason: "smallest_tree" });
    // Another session with the same text follows the text, not its own rendezvous winner.
    const second = await s.place("session-b", "small", backends, new Set(), hints(text));
    expect(second).toMatchObject({ backend: { id: "e0" }, reason: "cache_match" });
    expect(store.size).toBe(0);
    expect(recorder.misses.get("small")).toBe(2);
    expect(recorder.hits.get("small")).toBeUndefined();
  });

  it("keeps the policy (and its index) across a reload with the same settings, replaces it when they change", async () => {
    const { s } = scheduler(createPolicy(config("sglang_cache_aware"), new SeededRandom(1), 0));
    const backends = [candidate("e0"), candidate("e1")];
    const text = "t".repeat(200);
    await s.place(undefined, "small", backends, new Set(), hints(text));
    const settings = {
      stickyTtlMs: 1_800_000,
      balancer: createBalancer("least_inflight", new SeededRandom(1)),
      loadFactor: 1.25,
      sessionless: "prefix" as const,
    };
    s.configure({ ...settings, policy: createPolicy(config("sglang_cache_aware"), new SeededRandom(1), 0) });
    expect((await s.place(undefined, "small", backends, new Set(), hints(text)))?.reason).toBe("cache_match");
    // A new threshold is a new policy: its tree starts empty.
    s.configure({
      ...settings,
      policy: createPolicy(config("sglang_cache_aware", 0.9), new SeededRandom(1), 0),
    });
    expect((await s.place(undefined, "small", backends, new Set(), hints(text)))?.reason).toBe(
      "smallest_tree",
    );
    // hrw: back to session affinity.
    s.configure({ ...settings, policy: createPolicy(config("hrw"), new SeededRandom(1), 0) });
    expect((await s.place("session-a", "small", backends))?.reason).toBe("new_session");
  });
});
