// The placement service: looks the session's binding up, lets the pure decision place, applies its effects, records it.
import type { Clock } from "../core/clock.js";
import {
  activeWorkOf,
  blockSizeFor,
  cachedTokensOf,
  otherReplicasLoadOf,
  renderedPromptOf,
  roomTokensOf,
} from "../kv-events/cached-tokens.js";
import type { KvCacheView, PlacedPrompt } from "../kv-events/kv-cache-view.js";
import type { PromptBlocks } from "../kv-events/prompt-blocks.js";
import type { Balancer } from "./balancers.js";
import type { BindingLookup, BindingStore } from "./binding-store.js";
import {
  decidePlacement,
  usesBinding,
  type PlacementDecision,
  type PlacementHints,
  type PlacementSettings,
  type SchedulingCandidate,
  type Selection,
  type SessionlessMode,
} from "./decide.js";
import type { Hash64 } from "./hash.js";
import type { PlacementPolicy } from "./policies/policy.js";
import { hashSession, rendezvousRanking, rendezvousWinner } from "./rendezvous.js";

/** Where outcomes go (Prometheus in the gateway, plain counters in tests): the core has no metrics dependency. */
export interface AffinityRecorder {
  hit(tier: string): void;
  miss(tier: string): void;
  broken(tier: string, count: number): void;
  /** A bound session's request went elsewhere because its pinned backend had no free slot. */
  spill(tier: string): void;
}

export interface PlacementServiceOptions {
  store: BindingStore;
  clock: Clock;
  /** Places requests when affinity does not decide (TTL 0, no session id). */
  balancer: Balancer;
  recorder: AffinityRecorder;
  /** 0 disables affinity: no bindings, no rendezvous. */
  stickyTtlMs: number;
  rebalanceOnRecovery?: boolean;
  /** Bounded-load factor c >= 1 (affinity.load_factor); 0 turns the bound and spilling off. */
  loadFactor: number;
  /** Placement of requests without a session id (affinity.sessionless). */
  sessionless: SessionlessMode;
  /** Engine readings older than this are not placed by (default: never too old). */
  engineSignalMaxAgeMs?: number;
  /** affinity.policy other than hrw: this policy places every request, sessions ignored (src/affinity/policies). */
  policy?: PlacementPolicy | undefined;
  /** What engines publishing KV events hold (src/kv-events); placement by it when present. */
  kvCache?: KvCacheView | undefined;
  /** affinity.kv_events.move_min_tokens. */
  kvMoveMinTokens?: number;
  /** affinity.kv_events.prefill_context_weight (default: none, every prompt token weighs the same). */
  kvPrefillContextWeight?: number;
}

/** What a reload may change. */
export type SchedulerSettings = Pick<
  PlacementServiceOptions,
  | "stickyTtlMs"
  | "rebalanceOnRecovery"
  | "balancer"
  | "loadFactor"
  | "sessionless"
  | "policy"
  | "engineSignalMaxAgeMs"
  | "kvMoveMinTokens"
  | "kvPrefillContextWeight"
>;

/** A session's binding as one lookup found it (undefined inside: never bound, or not read). */
export interface LookedUp {
  readonly binding: BindingLookup;
}

const NOT_BOUND: LookedUp = { binding: undefined };

/** A placement: at once when the store answered at once, else once it does. */
/**
 * The KV side of a placement: the prediction for the chosen engine as placed, and the prompt's pending blocks
 * there (undefined when they are not tracked) with the work ahead of it at the placement.
 */
interface KvSend {
  readonly expectedCachedTokens: number;
  readonly placed: PlacedPrompt | undefined;
  readonly aheadTokens: number;
}

export type Placed<T extends SchedulingCandidate> =
  Selection<T> | undefined | Promise<Selection<T> | undefined>;

function lookedUp(binding: BindingLookup): LookedUp {
  return { binding };
}
const NO_EXCLUSIONS: ReadonlySet<string> = new Set();
const NO_HINTS: PlacementHints = { prefixKey: undefined };

export class PlacementService {
  private readonly store: BindingStore;
  private readonly clock: Clock;
  private readonly recorder: AffinityRecorder;
  private settings: PlacementSettings;
  private rebalanceOnRecovery: boolean;
  private readonly kvCache: KvCacheView | undefined;

  constructor(options: PlacementServiceOptions) {
    this.kvCache = options.kvCache;
    this.store = options.store;
    this.clock = options.clock;
    this.recorder = options.recorder;
    this.rebalanceOnRecovery = options.rebalanceOnRecovery ?? false;
    this.settings = placementSettings(options, options.engineSignalMaxAgeMs ?? Infinity, undefined);
    this.store.onBroken((tier, count) => this.recorder.broken(tier, count));
  }

  /** Engine readings older than this are not placed by (a reload of the poll interval moves it). */
  get engineSignalMaxAgeMs(): number {
    return this.settings.engineSignalMaxAgeMs;
  }

  get affinityEnabled(): boolean {
    return this.settings.ttlMs > 0;
  }

  /**
   * Applies a reloaded config; existing bindings keep their expiry until next used. Turning affinity off
   * forgets every binding (a later TTL must not revive them, nor an outage count them as broken).
   */
  configure(settings: SchedulerSettings): void {
    const previous = this.settings;
    if (settings.stickyTtlMs <= 0 && previous.ttlMs > 0) this.store.clear();
    this.rebalanceOnRecovery = settings.rebalanceOnRecovery ?? false;
    this.settings = placementSettings(
      settings,
      settings.engineSignalMaxAgeMs ?? previous.engineSignalMaxAgeMs,
      previous.policy,
    );
  }

  /**
   * The session's binding as the request's routing sees it (a live binding's TTL slides with it; none when
   * placement would not read it). Hand it to place() for the first attempt, so the turn costs one lookup.
   */
  lookup(sessionId: string | undefined): LookedUp | Promise<LookedUp> {
    if (!usesBinding(this.settings, sessionId)) return NOT_BOUND;
    try {
      const binding = this.store.lookup(sessionId, this.clock.nowMs(), "route");
      return binding instanceof Promise ? binding.then(lookedUp) : lookedUp(binding);
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  /**
   * Places one attempt of a request. `exclude` holds backends that already failed this request (failover);
   * `hints` carries the prompt's prefix key and text, read only when placement needs them; `looked` is a
   * lookup() already made for this attempt (else the store is asked). Undefined when no candidate can take it.
   * Answers at once when the store does (the memory store); a failure is always a rejected promise.
   */
  place<T extends SchedulingCandidate>(
    sessionId: string | undefined,
    tier: string,
    candidates: readonly T[],
    exclude: ReadonlySet<string> = NO_EXCLUSIONS,
    hints: PlacementHints = NO_HINTS,
    looked?: LookedUp,
  ): Placed<T> {
    try {
      const bound = !usesBinding(this.settings, sessionId)
        ? undefined
        : looked !== undefined
          ? looked.binding
          : this.store.lookup(sessionId, this.clock.nowMs(), "route");
      if (!(bound instanceof Promise))
        return this.placeBy(bound, sessionId, tier, candidates, exclude, hints);
      return bound.then((binding) => this.placeBy(binding, sessionId, tier, candidates, exclude, hints));
    } catch (err) {
      return Promise.reject(err as Error);
    }
  }

  /** place() once the session's binding is known. */
  private placeBy<T extends SchedulingCandidate>(
    bound: BindingLookup,
    sessionId: string | undefined,
    tier: string,
    candidates: readonly T[],
    exclude: ReadonlySet<string>,
    hints: PlacementHints,
  ): Placed<T> {
    const settings = this.settings;
    const nowMs = this.clock.nowMs();
    const kv = this.kvCache === undefined || this.kvCache.size === 0 ? undefined : this.kvCache;
    const blocksOf = (size: number) => hints.kvPromptBlocks?.(size);
    const cachedTokens =
      kv === undefined ? undefined : cachedTokensOf(kv, candidateIds(candidates), blocksOf, sessionId);
    // Engines' work, room and the prompt's length matter only where some engine holds part of the prompt.
    const kvKnown = kv !== undefined && cachedTokens !== undefined ? kv : undefined;
    const prompt = kvKnown && renderedPromptOf(kvKnown, candidateIds(candidates), blocksOf);
    const decision = decidePlacement(settings, {
      sessionId,
      tier,
      candidates,
      exclude,
      hints,
      binding: bound,
      nowMs,
      cachedTokens,
      activeWork:
        kvKnown && activeWorkOf(kvKnown, candidateIds(candidates), settings.kvPrefillContextWeight ?? 0),
      roomTokens: kvKnown && roomTokensOf(kvKnown, candidateIds(candidates)),
      promptTokens: prompt?.promptTokens,
      opensConversation: prompt?.opensConversation,
      otherReplicasLoad: kvKnown && otherReplicasLoadOf(kvKnown, candidateIds(candidates)),
    });
    // The prompt's blocks count as pending on its engine before anything is awaited: a request placed while
    // this one waits for the store (a burst's next sub-agent) must find them (src/kv-events).
    const kvPart =
      decision.selection === undefined
        ? undefined
        : this.kvSend(kv, decision.selection.backend.id, cachedTokens, blocksOf);
    const release = (err: unknown): never => {
      kvPart?.placed?.release();
      throw err;
    };
    let applying: void | Promise<void> = undefined;
    try {
      if (decision.effects.length > 0) applying = this.store.apply(decision.effects, nowMs);
    } catch (err) {
      release(err);
    }
    if (applying instanceof Promise) {
      // Counted as load on its backend until it is in flight: the requests of a burst placed during the
      // store's round trip must see each other, or every one of them finds the same loads and the bound
      // lets them all onto one engine (docs/kv-events.md, ninth round).
      const backend = decision.selection?.backend;
      if (backend !== undefined) backend.placing = (backend.placing ?? 0) + 1;
      const placed = (): void => {
        if (backend !== undefined) backend.placing = Math.max(0, (backend.placing ?? 1) - 1);
      };
      return applying.then(
        () => {
          placed();
          return this.selected(decision, tier, kvPart);
        },
        (err: unknown) => {
          placed();
          return release(err);
        },
      );
    }
    return this.selected(decision, tier, kvPart);
  }

  /** The decision's selection, once its effects are in the store: counted, and its KV prediction added. */
  private selected<T extends SchedulingCandidate>(
    decision: PlacementDecision<T>,
    tier: string,
    kvPart: KvSend | undefined,
  ): Selection<T> | undefined {
    if (decision.selection === undefined) return undefined;
    if (decision.outcome === "hit") {
      this.recorder.hit(tier);
    } else {
      this.recorder.miss(tier);
      if (decision.outcome === "spill") this.recorder.spill(tier);
    }
    if (kvPart === undefined) return decision.selection;
    // Written out rather than spread (a spread plus new members costs microseconds in V8).
    const { backend, affinityHit, reason } = decision.selection;
    const { placed } = kvPart;
    if (placed === undefined)
      return { backend, affinityHit, reason, expectedCachedTokens: kvPart.expectedCachedTokens };
    // Predicted as the request leaves (after its binding write and its wait for a slot), not as it was placed:
    // another request's prompt placed on the engine and not yet sent reaches it after this one, and one sent
    // meanwhile (by this replica or another) before it (docs/kv-events.md, "Tenth round").
    // With replicas sharing their sends, it is announced to them first and predicted once its own message came
    // back from the fleet's channel ("Announced, then predicted").
    const predictAndSend = (): number => {
      const expectedCachedTokens = placed.expectedAtSend(kvPart.aheadTokens);
      placed.markSent(expectedCachedTokens);
      return expectedCachedTokens;
    };
    const send = (): number | Promise<number> => {
      const announced = placed.announce();
      return announced === undefined ? predictAndSend() : announced.then(predictAndSend);
    };
    return { backend, affinityHit, reason, send, releaseKvPending: placed.release };
  }

  /**
   * The prediction for the chosen engine (what it holds now, less what it will evict for the work sent there
   * before this request), and the prompt's pending blocks recorded there; undefined when it publishes no events.
   */
  private kvSend(
    kv: KvCacheView | undefined,
    backendId: string,
    cachedTokens: ReadonlyMap<string, number> | undefined,
    blocksOf: (size: number) => PromptBlocks | undefined,
  ): KvSend | undefined {
    const held = cachedTokens?.get(backendId);
    if (held === undefined || kv === undefined) return undefined;
    const blocks = blocksOf(blockSizeFor(kv, backendId));
    const aheadTokens = kv.activeTokens(backendId) ?? 0;
    if (blocks === undefined) return { expectedCachedTokens: held, placed: undefined, aheadTokens };
    const expectedCachedTokens = kv.forecastHeld(backendId, blocks, held, aheadTokens);
    return { expectedCachedTokens, placed: kv.place(backendId, blocks, expectedCachedTokens), aheadTokens };
  }

  /** An attempt placed by place() ended (answered, failed, cancelled): what it held pending is let go. */
  attemptEnded<T extends SchedulingCandidate>(selection: Selection<T>): void {
    selection.releaseKvPending?.();
  }

  /** Every candidate in the session's rendezvous order, best first (for admin views and placement). */
  ranking<T extends SchedulingCandidate>(sessionId: string, candidates: readonly T[]): T[] {
    return rendezvousRanking(hashSession(sessionId), candidates);
  }

  /** The backend id a session is bound to now, if any (live bindings only; the lookup refreshes nothing). */
  async boundBackend(sessionId: string): Promise<string | undefined> {
    const bound = await this.store.lookup(sessionId, this.clock.nowMs(), "peek");
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
  async onAttemptFailed(sessionId: string | undefined, tier: string, backendId: string): Promise<void> {
    if (sessionId === undefined || this.settings.ttlMs <= 0) return;
    await this.store.apply([{ kind: "break", sessionId, backendId, tier }], this.clock.nowMs());
  }

  /** The health checker marked a backend down: every binding to it is broken at once; resolves how many. */
  onBackendDown(backendId: string, tier: string): Promise<number> {
    return this.store.breakBackend(backendId, tier, this.clock.nowMs());
  }

  /**
   * A backend came back. With rebalancing on, sessions of its tier whose rendezvous winner it is move back
   * to it; otherwise (the default) sessions stay where their cache is now warm. Resolves how many moved.
   */
  async onBackendUp<T extends SchedulingCandidate>(
    backendId: string,
    tierCandidates: readonly T[],
  ): Promise<number> {
    if (!this.rebalanceOnRecovery || this.settings.ttlMs <= 0) return 0;
    const nowMs = this.clock.nowMs();
    const winsHere = (placement: Hash64) =>
      rendezvousWinner(placement, tierCandidates, (c) => c.state === "up")?.id === backendId;
    let moved = 0;
    for (const other of tierCandidates) {
      if (other.id !== backendId)
        moved += await this.store.moveSessions(other.id, backendId, nowMs, winsHere);
    }
    return moved;
  }
}

function* candidateIds(candidates: readonly SchedulingCandidate[]): Iterable<string> {
  for (const c of candidates) yield c.id;
}

/**
 * The decision's settings from the service's. A policy with the same settings as `previousPolicy` (a reload
 * that keeps it) stays the same object, keeping its index (its picture of the engines' caches).
 */
function placementSettings(
  settings: SchedulerSettings,
  engineSignalMaxAgeMs: number,
  previousPolicy: PlacementPolicy | undefined,
): PlacementSettings {
  return {
    ttlMs: settings.stickyTtlMs,
    loadFactor: settings.loadFactor,
    sessionless: settings.sessionless,
    balancer: settings.balancer,
    policy: settings.policy?.key === previousPolicy?.key ? previousPolicy : settings.policy,
    engineSignalMaxAgeMs,
    kvMoveMinTokens: settings.kvMoveMinTokens,
    kvPrefillContextWeight: settings.kvPrefillContextWeight,
  };
}
