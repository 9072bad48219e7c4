// The scheduler as it was before the placement pipeline (main at fef73b8), kept verbatim as a model: at
// load_factor 0 the new scheduler must decide exactly as this one does (placement/equivalence.property.test.ts).
import type { Clock } from "../../src/core/clock.js";
import type { Balancer } from "../../src/affinity/balancers.js";
import { BROKEN, EXPIRED } from "../../src/affinity/binding-store.js";
import type { StickyTable } from "../../src/affinity/sticky-table.js";
import type { Hash64 } from "../../src/affinity/hash.js";
import {
  hashSession,
  rendezvousRanking,
  rendezvousWinner,
  type RendezvousCandidate,
} from "../../src/affinity/rendezvous.js";

/** up: takes new sessions; draining: keeps its pinned sessions, takes no new ones; down: takes nothing. */
export type BackendState = "up" | "down" | "draining";

export interface SchedulingCandidate extends RendezvousCandidate {
  readonly state: BackendState;
  /** Requests in flight on the backend now: the load signal when affinity does not decide. */
  readonly inflight: number;
}

/** Why a request went where it went; reported to clients in `x_agent_serve.reason`. */
export type SelectionReason =
  | "affinity_hit" // the session's live binding, TTL refreshed
  | "new_session" // first sight (or forgotten): rendezvous winner, binding written
  | "rebind_expired" // the binding lapsed: rendezvous again
  | "rebind_backend_down" // the pinned backend went down or failed a request: rendezvous over the rest
  | "rebind_tier_changed" // the session's binding is to a backend of another tier
  | "failover" // an earlier attempt of this request failed: next backend of the ranking
  | "affinity_disabled" // sticky_ttl_seconds is 0: the balancer picks (least in-flight by default)
  | "no_session"; // no session id: the balancer picks

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
}

export interface AffinitySchedulerOptions {
  store: StickyTable;
  clock: Clock;
  /** Places requests when affinity does not decide (TTL 0, no session id). */
  balancer: Balancer;
  recorder: AffinityRecorder;
  /** 0 disables affinity: no bindings, no rendezvous. */
  stickyTtlSeconds: number;
  rebalanceOnRecovery?: boolean;
}

const NO_EXCLUSIONS: ReadonlySet<string> = new Set();

export class ReferenceScheduler {
  private readonly store: StickyTable;
  private readonly clock: Clock;
  private balancer: Balancer;
  private readonly recorder: AffinityRecorder;
  private ttlMs: number;
  private rebalanceOnRecovery: boolean;

  constructor(options: AffinitySchedulerOptions) {
    this.store = options.store;
    this.clock = options.clock;
    this.balancer = options.balancer;
    this.recorder = options.recorder;
    this.ttlMs = options.stickyTtlSeconds * 1000;
    this.rebalanceOnRecovery = options.rebalanceOnRecovery ?? false;
  }

  get affinityEnabled(): boolean {
    return this.ttlMs > 0;
  }

  /**
   * Applies a reloaded config; existing bindings keep their expiry until next used. Turning affinity off
   * forgets every binding (a later TTL must not revive them, nor an outage count them as broken).
   */
  configure(stickyTtlSeconds: number, rebalanceOnRecovery: boolean, balancer: Balancer): void {
    if (stickyTtlSeconds <= 0 && this.ttlMs > 0) this.store.clear();
    this.ttlMs = stickyTtlSeconds * 1000;
    this.rebalanceOnRecovery = rebalanceOnRecovery;
    this.balancer = balancer;
  }

  /**
   * Picks the backend for one attempt of a request. `exclude` holds backends that already failed this
   * request (failover); they are skipped. Returns undefined when no candidate can take the request.
   */
  selectBackend<T extends SchedulingCandidate>(
    sessionId: string | undefined,
    tier: string,
    candidates: readonly T[],
    exclude: ReadonlySet<string> = NO_EXCLUSIONS,
  ): Selection<T> | undefined {
    if (sessionId === undefined || this.ttlMs <= 0) {
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
    const winner = rendezvousWinner(placement, candidates, (c) => c.state === "up" && !exclude.has(c.id));
    if (winner === undefined) return undefined;
    this.store.bind(sessionId, placement, winner.id, nowMs + this.ttlMs, nowMs);
    this.recorder.miss(tier);
    return { backend: winner, affinityHit: false, reason };
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
