// The session-affinity scheduler: sticky bindings over rendezvous hashing, with the seed note's exact semantics.
import type { Clock } from "../core/clock.js";
import type { Balancer } from "./balancers.js";
import { BROKEN, EXPIRED, type BindingStore } from "./binding-store.js";
import type { Hash64 } from "./hash.js";
import { hasFreeSlot, loadBound, loadOf, placementState } from "./placement/load.js";
import { runPipeline } from "./placement/pipeline.js";
import { boundedRendezvousPipeline, sessionPlacementPipeline, spillPipeline } from "./placement/pipelines.js";
import type { PlacementCandidate, PlacementRequest } from "./placement/types.js";
import type { PlacementPolicy, PolicyReason } from "./policies/policy.js";
import { hashSession, rendezvousRanking, rendezvousWinner } from "./rendezvous.js";

export type { BackendState } from "./placement/types.js";

/** A backend as the scheduler sees it (the placement pipeline's candidate). */
export type SchedulingCandidate = PlacementCandidate;

/** What placement reads of the request beyond its session id (read only when needed, so it may be lazy). */
export interface PlacementHints {
  /** Hash of the prompt's shared leading part (src/affinity/prefix-key.ts), if it has one. */
  readonly prefixKey: Hash64 | undefined;
  /** The prompt text a cache-aware policy routes by (src/affinity/policies/routing-text.ts); read only by one. */
  readonly routingText?: string;
  /** The serialised prompt llm-d's prefix scorer hashes; read only by that policy. */
  readonly promptBytes?: string;
}

export const SESSIONLESS_MODES = ["prefix", "balancer"] as const;
/** How requests without a session id are placed: by their prompt prefix's rendezvous ranking, or by the balancer. */
export type SessionlessMode = (typeof SESSIONLESS_MODES)[number];

/** Why a request went where it went; reported to clients in `x_agent_serve.reason`. */
export type SelectionReason =
  | "affinity_hit" // the session's live binding, TTL refreshed
  | "new_session" // first sight (or forgotten): rendezvous winner, binding written
  | "rebind_expired" // the binding lapsed: rendezvous again
  | "rebind_backend_down" // the pinned backend went down or failed a request: rendezvous over the rest
  | "rebind_tier_changed" // the session's binding is to a backend of another tier
  | "failover" // an earlier attempt of this request failed: next backend of the ranking
  | "affinity_disabled" // sticky_ttl_seconds is 0: the balancer picks (least in-flight by default)
  | "no_session" // no session id (and no prefix placement): the balancer picks
  | "spill" // the pinned backend has no free slot: one request goes to the next of the ranking; binding kept
  | "prefix" // no session id: the prompt prefix key's home while it has a free slot, else within the bound; nothing bound
  | PolicyReason; // affinity.policy other than hrw: the policy's own reason (src/affinity/policies)

export interface Selection<T extends SchedulingCandidate> {
  readonly backend: T;
  readonly affinityHit: boolean;
  readonly reason: SelectionReason;
}

/** Where outcomes go (Prometheus in the gateway, plain counters in tests): the core has no metrics dependency. */
export interface AffinityRecorder {
  hit(tier: string): void;
  miss(tier: string): void;
  broken(tier: string, count: number): void;
  /** A bound session's request went elsewhere because its pinned backend had no free slot. */
  spill(tier: string): void;
}

export interface AffinitySchedulerOptions {
  store: BindingStore;
  clock: Clock;
  /** Places requests when affinity does not decide (TTL 0, no session id). */
  balancer: Balancer;
  recorder: AffinityRecorder;
  /** 0 disables affinity: no bindings, no rendezvous. */
  stickyTtlSeconds: number;
  rebalanceOnRecovery?: boolean;
  /** Bounded-load factor c >= 1 (affinity.load_factor); 0 turns the bound and spilling off. */
  loadFactor: number;
  /** Placement of requests without a session id (affinity.sessionless). */
  sessionless: SessionlessMode;
  /** Engine readings older than this are not placed by (default: never too old). */
  engineSignalMaxAgeMs?: number;
  /** affinity.policy other than hrw: this policy places every request, sessions ignored (src/affinity/policies). */
  policy?: PlacementPolicy | undefined;
}

/** What a reload may change. */
export type SchedulerSettings = Pick<
  AffinitySchedulerOptions,
  "stickyTtlSeconds" | "rebalanceOnRecovery" | "balancer" | "loadFactor" | "sessionless" | "policy"
>;

const NO_EXCLUSIONS: ReadonlySet<string> = new Set();
const NO_HINTS: PlacementHints = { prefixKey: undefined };

export class AffinityScheduler {
  private readonly store: BindingStore;
  private readonly clock: Clock;
  private balancer: Balancer;
  private readonly recorder: AffinityRecorder;
  private ttlMs: number;
  private rebalanceOnRecovery: boolean;
  private loadFactor: number;
  private sessionless: SessionlessMode;
  private readonly engineSignalMaxAgeMs: number;
  private policy: PlacementPolicy | undefined;

  constructor(options: AffinitySchedulerOptions) {
    this.store = options.store;
    this.clock = options.clock;
    this.balancer = options.balancer;
    this.recorder = options.recorder;
    this.ttlMs = options.stickyTtlSeconds * 1000;
    this.rebalanceOnRecovery = options.rebalanceOnRecovery ?? false;
    this.loadFactor = options.loadFactor;
    this.sessionless = options.sessionless;
    this.engineSignalMaxAgeMs = options.engineSignalMaxAgeMs ?? Infinity;
    this.policy = options.policy;
  }

  get affinityEnabled(): boolean {
    return this.ttlMs > 0;
  }

  /**
   * Applies a reloaded config; existing bindings keep their expiry until next used. Turning affinity off
   * forgets every binding (a later TTL must not revive them, nor an outage count them as broken).
   */
  configure(settings: SchedulerSettings): void {
    if (settings.stickyTtlSeconds <= 0 && this.ttlMs > 0) this.store.clear();
    this.ttlMs = settings.stickyTtlSeconds * 1000;
    this.rebalanceOnRecovery = settings.rebalanceOnRecovery ?? false;
    this.balancer = settings.balancer;
    this.loadFactor = settings.loadFactor;
    this.sessionless = settings.sessionless;
    // A reload that keeps the policy and its settings keeps its index (its picture of the engines' caches).
    if (settings.policy?.key !== this.policy?.key) this.policy = settings.policy;
  }

  /**
   * Picks the backend for one attempt of a request. `exclude` holds backends that already failed this
   * request (failover); they are skipped. `hints` carries the prompt's prefix key, read only for requests
   * without a session id. Returns undefined when no candidate can take the request.
   */
  selectBackend<T extends SchedulingCandidate>(
    sessionId: string | undefined,
    tier: string,
    candidates: readonly T[],
    exclude: ReadonlySet<string> = NO_EXCLUSIONS,
    hints: PlacementHints = NO_HINTS,
  ): Selection<T> | undefined {
    if (this.policy !== undefined) {
      const decision = this.policy.select(
        { tier, text: hints.routingText ?? "", promptBytes: hints.promptBytes ?? "", exclude },
        candidates,
        this.clock.nowMs(),
      );
      if (decision === undefined) return undefined;
      this.recorder.miss(tier);
      return { backend: decision.backend, affinityHit: false, reason: decision.reason };
    }
    if (sessionId === undefined || this.ttlMs <= 0) {
      if (sessionId === undefined && this.ttlMs > 0 && this.sessionless === "prefix") {
        const prefixKey = hints.prefixKey;
        if (prefixKey !== undefined) return this.placeByPrefix(prefixKey, tier, candidates, exclude);
      }
      const backend = this.balancer.pick(tier, candidates, (c) => c.state === "up" && !exclude.has(c.id));
      if (backend === undefined) return undefined;
      this.recorder.miss(tier);
      return {
        backend,
        affinityHit: false,
        reason: sessionId === undefined ? "no_session" : "affinity_disabled",
      };
    }

    const nowMs = this.clock.nowMs();
    const bound = this.store.get(sessionId, nowMs);
    let reason: SelectionReason = exclude.size > 0 ? "failover" : "new_session";
    if (typeof bound === "string") {
      const pinned = findById(candidates, bound);
      if (pinned === undefined) {
        reason = "rebind_tier_changed";
      } else if (pinned.state !== "down" && !exclude.has(pinned.id)) {
        this.store.refresh(sessionId, nowMs + this.ttlMs);
        // The hit path: a free slot (always, under uniform load) means no pipeline, no allocation.
        if (this.loadFactor > 0 && !hasFreeSlot(pinned)) {
          const spill = this.spillTarget(sessionId, tier, candidates, exclude, nowMs);
          if (spill !== undefined) {
            this.recorder.miss(tier);
            this.recorder.spill(tier);
            return { backend: spill, affinityHit: false, reason: "spill" };
          }
        }
        this.recorder.hit(tier);
        return { backend: pinned, affinityHit: true, reason: "affinity_hit" };
      } else if (this.store.breakBinding(sessionId, pinned.id, nowMs)) {
        // Down without the health event having reached us yet, or excluded because it failed this request
        // and nobody called onAttemptFailed: either way a binding its engine broke, counted here once.
        this.recorder.broken(tier, 1);
        if (exclude.size === 0) reason = "rebind_backend_down";
      }
    } else if (bound === EXPIRED) {
      reason = "rebind_expired";
    } else if (bound === BROKEN && exclude.size === 0) {
      reason = "rebind_backend_down";
    }

    const placement = hashSession(sessionId);
    const winner =
      this.loadFactor > 0
        ? this.placeSession(placement, { tier, sessionId, prefixKey: undefined, exclude }, candidates, nowMs)
        : rendezvousWinner(placement, candidates, (c) => c.state === "up" && !exclude.has(c.id));
    if (winner === undefined) return undefined;
    this.store.bind(sessionId, placement, winner.id, nowMs + this.ttlMs, nowMs);
    this.recorder.miss(tier);
    return { backend: winner, affinityHit: false, reason };
  }

  /**
   * A request without a session id, placed like a bound session's turn with its prefix key's rendezvous
   * winner as its home (nothing is written): home while it can start the request now, else the first of the
   * key's ranking that can and is within the bound, else (none within the bound can) the first within it.
   * The home is where the template's prefix is cached; a request sent elsewhere while the home has a free
   * slot would prefill the whole shared prompt again for no gain in waiting (docs/affinity.md).
   */
  private placeByPrefix<T extends SchedulingCandidate>(
    prefixKey: Hash64,
    tier: string,
    candidates: readonly T[],
    exclude: ReadonlySet<string>,
  ): Selection<T> | undefined {
    const home = rendezvousWinner(prefixKey, candidates, (c) => c.state === "up" && !exclude.has(c.id));
    if (home === undefined) return undefined;
    let backend = home;
    if (this.loadFactor > 0 && !hasFreeSlot(home)) {
      const request: PlacementRequest = { tier, sessionId: undefined, prefixKey, exclude };
      const state = this.stateFor(prefixKey, candidates, this.clock.nowMs());
      backend =
        runPipeline(spillPipeline, request, state, candidates) ??
        runPipeline(boundedRendezvousPipeline, request, state, candidates) ??
        home;
    }
    this.recorder.miss(tier);
    return { backend, affinityHit: false, reason: "prefix" };
  }

  /**
   * A session's placement (sessionPlacementPipeline). When the exclusions leave no backend within the bound
   * (the bound always admits one up backend, but that one may have failed this request), the plain
   * rendezvous winner among the rest: a request is better served late than refused.
   */
  private placeSession<T extends SchedulingCandidate>(
    key: Hash64,
    request: PlacementRequest,
    candidates: readonly T[],
    nowMs: number,
  ): T | undefined {
    const { exclude } = request;
    const winner = rendezvousWinner(key, candidates, (c) => c.state === "up" && !exclude.has(c.id));
    if (winner === undefined) return undefined;
    const state = this.stateFor(key, candidates, nowMs);
    // The common case, without allocating: the key's winner is within its bound and can start the request
    // now, so it is what the pipeline picks (its top score passes the filters). Otherwise the pipeline walks
    // the ranking.
    if (hasFreeSlot(winner) && loadOf(winner) + 1 <= loadBound(winner, state)) return winner;
    return runPipeline(sessionPlacementPipeline, request, state, candidates) ?? winner;
  }

  /** Where a bound session's request may spill: free now, within the bound, best of its ranking. */
  private spillTarget<T extends SchedulingCandidate>(
    sessionId: string,
    tier: string,
    candidates: readonly T[],
    exclude: ReadonlySet<string>,
    nowMs: number,
  ): T | undefined {
    const state = this.stateFor(hashSession(sessionId), candidates, nowMs);
    return runPipeline(spillPipeline, { tier, sessionId, prefixKey: undefined, exclude }, state, candidates);
  }

  private stateFor(key: Hash64, candidates: readonly SchedulingCandidate[], nowMs: number) {
    return placementState(key, candidates, {
      loadFactor: this.loadFactor,
      nowMs,
      engineSignalMaxAgeMs: this.engineSignalMaxAgeMs,
    });
  }

  /** Every candidate in the session's rendezvous order, best first (for admin views and placement). */
  ranking<T extends SchedulingCandidate>(sessionId: string, candidates: readonly T[]): T[] {
    return rendezvousRanking(hashSession(sessionId), candidates);
  }

  /** The backend id a session is bound to now, if any (live bindings only). */
  boundBackend(sessionId: string): string | undefined {
    const bound = this.store.get(sessionId, this.clock.nowMs());
    return typeof bound === "string" ? bound : undefined;
  }

  /** Live bindings to a backend (admin view and the bindings gauge). */
  bindingsOf(backendId: string): number {
    return this.store.countFor(backendId);
  }

  /**
   * An attempt on `backendId` failed before any byte reached the client: the session's binding to it is
   * broken (and counted) so the retry rebinds to the next backend of its ranking.
   */
  onAttemptFailed(sessionId: string | undefined, tier: string, backendId: string): void {
    if (sessionId === undefined || this.ttlMs <= 0) return;
    if (this.store.breakBinding(sessionId, backendId, this.clock.nowMs())) this.recorder.broken(tier, 1);
  }

  /** The health checker marked a backend down: every binding to it is broken at once; returns how many. */
  onBackendDown(backendId: string, tier: string): number {
    const broken = this.store.breakBackend(backendId, this.clock.nowMs());
    if (broken > 0) this.recorder.broken(tier, broken);
    return broken;
  }

  /**
   * A backend came back. With rebalancing on, sessions of its tier whose rendezvous winner it is move back
   * to it; otherwise (the default) sessions stay where their cache is now warm. Returns how many moved.
   */
  onBackendUp<T extends SchedulingCandidate>(backendId: string, tierCandidates: readonly T[]): number {
    if (!this.rebalanceOnRecovery || this.ttlMs <= 0) return 0;
    const nowMs = this.clock.nowMs();
    const winsHere = (placement: Hash64) =>
      rendezvousWinner(placement, tierCandidates, (c) => c.state === "up")?.id === backendId;
    let moved = 0;
    for (const other of tierCandidates) {
      if (other.id !== backendId) moved += this.store.moveSessions(other.id, backendId, nowMs, winsHere);
    }
    return moved;
  }
}

function findById<T extends SchedulingCandidate>(candidates: readonly T[], id: string): T | undefined {
  for (const candidate of candidates) if (candidate.id === id) return candidate;
  return undefined;
}
