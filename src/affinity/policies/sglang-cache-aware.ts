// SGLang's cache-aware routing policy (sgl-router), re-implemented: radix-tree prefix match unless the load is imbalanced.
import { loadOf } from "../placement/load.js";
import type { PlacementCandidate } from "../placement/types.js";
import type { PlacementPolicy, PolicyDecision, PolicyRequest } from "./policy.js";
import { RadixTree } from "./radix-tree.js";

export interface SglangCacheAwareSettings {
  /** Match rate (matched / routed characters) above which the best-matching backend is taken. */
  cacheThreshold: number;
  /** Imbalanced when max load - min load exceeds this ... */
  balanceAbsThreshold: number;
  /** ... and max load exceeds min load times this. */
  balanceRelThreshold: number;
  /** How often each tenant's share of the tree is cut back to maxTreeChars (0: never). */
  evictionIntervalMs: number;
  maxTreeChars: number;
}

/** sgl-router's `CacheAwareConfig::default()` as of the cache_aware.rs this follows (README, docs/placement-policies.md). */
export const SGLANG_DEFAULTS: SglangCacheAwareSettings = {
  cacheThreshold: 0.5,
  balanceAbsThreshold: 32,
  balanceRelThreshold: 1.0001,
  evictionIntervalMs: 60_000,
  maxTreeChars: 100_000,
};

/**
 * One decision, in sgl-router's order: loads over every backend of the tier (healthy or not); imbalanced
 * (both thresholds exceeded) -> the least loaded healthy backend; otherwise the tree's longest prefix match
 * if its rate is above the threshold, else the backend with the smallest tree. The chosen backend's tree
 * gains the text. Load = requests in flight plus queued at the gateway for the backend (sgl-router counts
 * the requests it has sent a worker and not seen finish; this gateway's queue is part of that).
 */
export class SglangCacheAwarePolicy implements PlacementPolicy {
  readonly name = "sglang_cache_aware";
  readonly key: string;
  private readonly trees = new Map<string, RadixTree>();
  private nextEvictionAtMs: number | undefined;

  constructor(private readonly settings: SglangCacheAwareSettings = SGLANG_DEFAULTS) {
    this.key = `${this.name}:${JSON.stringify(settings)}`;
  }

  /** The tier's tree (tests and the admin view read it). */
  tree(tier: string): RadixTree {
    let tree = this.trees.get(tier);
    if (tree === undefined) {
      tree = new RadixTree();
      this.trees.set(tier, tree);
    }
    return tree;
  }

  select<T extends PlacementCandidate>(
    request: PolicyRequest,
    candidates: readonly T[],
    nowMs: number,
  ): PolicyDecision<T> | undefined {
    this.maybeEvict(nowMs);
    const tree = this.tree(request.tier);
    // sgl-router inserts "" for each worker as it joins; a tenant that left the tier is forgotten.
    for (const c of candidates) if (!tree.hasTenant(c.id)) tree.insert("", c.id, nowMs);
    for (const tenant of tree.tenants())
      if (!candidates.some((c) => c.id === tenant)) tree.removeTenant(tenant);

    const healthy = candidates.filter((c) => c.state === "up" && !request.exclude.has(c.id));
    if (healthy.length === 0) return undefined;

    let maxLoad = -Infinity;
    let minLoad = Infinity;
    for (const c of candidates) {
      const load = loadOf(c);
      if (load > maxLoad) maxLoad = load;
      if (load < minLoad) minLoad = load;
    }
    const { balanceAbsThreshold, balanceRelThreshold, cacheThreshold } = this.settings;
    if (maxLoad - minLoad > balanceAbsThreshold && maxLoad > minLoad * balanceRelThreshold) {
      let least = healthy[0]!;
      for (const c of healthy) if (loadOf(c) < loadOf(least)) least = c;
      tree.insert(request.text, least.id, nowMs);
      return { backend: least, reason: "least_load" };
    }

    const match = tree.prefixMatch(request.text, nowMs);
    const rate = request.text.length === 0 ? 0 : match.matchedChars / request.text.length;
    const chosenId = rate > cacheThreshold ? match.tenant : tree.smallestTenant(candidates.map((c) => c.id));
    const chosen = candidates.find((c) => c.id === chosenId);
    if (chosen !== undefined && healthy.includes(chosen)) {
      tree.insert(request.text, chosen.id, nowMs);
      return { backend: chosen, reason: rate > cacheThreshold ? "cache_match" : "smallest_tree" };
    }
    // sgl-router's fallback when its choice is unhealthy: the first healthy worker, the tree untouched.
    return { backend: healthy[0]!, reason: rate > cacheThreshold ? "cache_match" : "smallest_tree" };
  }

  private maybeEvict(nowMs: number): void {
    const interval = this.settings.evictionIntervalMs;
    if (interval <= 0) return;
    if (this.nextEvictionAtMs === undefined) this.nextEvictionAtMs = nowMs + interval;
    if (nowMs < this.nextEvictionAtMs) return;
    for (const tree of this.trees.values()) tree.evictToSize(this.settings.maxTreeChars);
    this.nextEvictionAtMs = nowMs + interval;
  }
}
