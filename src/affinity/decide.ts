// The placement decision, a pure function: binding lookup, candidates, request keys and time in; backend, reason and effects out.
import type { PromptBlocks } from "../kv-events/prompt-blocks.js";
import type { Balancer } from "./balancers.js";
import { BROKEN, EXPIRED, type BindingEffect, type BindingLookup } from "./binding-store.js";
import type { Hash64 } from "./hash.js";
import { hasFreeSlot, loadBound, loadOf, onUpBackends, placementState } from "./placement/load.js";
import { runPipeline } from "./placement/pipeline.js";
import { boundedRendezvousPipeline, sessionPlacementPipeline, spillPipeline } from "./placement/pipelines.js";
import type { PlacementCandidate, PlacementRequest } from "./placement/types.js";
import type { PlacementPolicy, PolicyReason } from "./policies/policy.js";
import { hashSession, rendezvousWinner } from "./rendezvous.js";
import {
  anyCandidateHolds,
  betterHolder,
  cheaperSpill,
  cheapestEngine,
  DEFAULT_KV_MOVE_MIN_TOKENS,
  type KvPlacementContext,
} from "./kv-placement.js";

export type { BackendState } from "./placement/types.js";

/** A backend as placement sees it (the placement pipeline's candidate). */
export type SchedulingCandidate = PlacementCandidate;

/** What placement reads of the request beyond its session id (read only when needed, so it may be lazy). */
export interface PlacementHints {
  /** Hash of the prompt's shared leading part (src/affinity/prefix-key.ts), if it has one. */
  readonly prefixKey: Hash64 | undefined;
  /** The prompt text a cache-aware policy routes by (src/affinity/policies/routing-text.ts); read only by one. */
  readonly routingText?: string;
  /** The serialised prompt llm-d's prefix scorer hashes; read only by that policy. */
  readonly promptBytes?: string;
  /** The prompt's KV blocks for a block size, when engines publish KV events (src/kv-events/prompt-blocks.ts). */
  readonly kvPromptBlocks?: (blockSizeTokens: number) => PromptBlocks | undefined;
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
  | "kv_prefix" // no session id: the cheapest engine by KV events (prompt left to compute + work ahead)
  | "kv_moved" // a bound session's engine lost its blocks and another (free now, cheaper) holds more
  | PolicyReason; // affinity.policy other than hrw: the policy's own reason (src/affinity/policies)

export interface Selection<T extends SchedulingCandidate> {
  readonly backend: T;
  readonly affinityHit: boolean;
  readonly reason: SelectionReason;
  /**
   * Tokens of the prompt the chosen engine holds by its KV events; absent when it publishes none, or until the
   * request is sent where `send` is given.
   */
  readonly expectedCachedTokens?: number;
  /**
   * The request leaves for the engine now (its slot taken): its prompt's pending blocks count from here for other
   * requests' predictions; returns the prediction for this send, after it was announced where replicas share
   * their sends (a promise then). Absent when no blocks were recorded (docs/kv-events.md, "Placed, then sent").
   */
  readonly send?: () => number | Promise<number>;
  /**
   * Ends the prompt's pending blocks on the chosen engine (src/kv-events/pending-blocks.ts): called when the
   * attempt ends (PlacementService.attemptEnded); absent when none were recorded.
   */
  readonly releaseKvPending?: () => void;
}

/** What the decision depends on besides the request (a reload replaces it whole). */
export interface PlacementSettings {
  /** The sticky TTL; 0 disables affinity: no bindings, no rendezvous. */
  readonly ttlMs: number;
  /** Bounded-load factor c >= 1 (affinity.load_factor); 0 turns the bound and spilling off. */
  readonly loadFactor: number;
  /** Placement of requests without a session id (affinity.sessionless). */
  readonly sessionless: SessionlessMode;
  /** Places requests when affinity does not decide (TTL 0, no session id). */
  readonly balancer: Balancer;
  /** affinity.policy other than hrw: this policy places every request, sessions ignored (src/affinity/policies). */
  readonly policy: PlacementPolicy | undefined;
  /** Engine readings older than this are not placed by. */
  readonly engineSignalMaxAgeMs: number;
  /** affinity.kv_events.move_min_tokens (src/affinity/kv-placement.ts). */
  readonly kvMoveMinTokens?: number;
  /** affinity.kv_events.prefill_context_weight (src/affinity/placement/score-kv-cost.ts); default 0. */
  readonly kvPrefillContextWeight?: number;
}

/** One attempt of a request, as placement sees it. */
export interface PlacementInput<T extends SchedulingCandidate> {
  readonly sessionId: string | undefined;
  readonly tier: string;
  readonly candidates: readonly T[];
  /** Backends that already failed this request (failover): skipped. */
  readonly exclude: ReadonlySet<string>;
  readonly hints: PlacementHints;
  /** The store's answer for the session; read only when usesBinding() says so. */
  readonly binding: BindingLookup;
  readonly nowMs: number;
  /** Tokens of the prompt each engine publishing KV events holds (src/kv-events); absent: none publishes. */
  readonly cachedTokens?: ReadonlyMap<string, number> | undefined;
  /**
   * The prefill each such engine has still to do for requests sent to it, in tokens at no context
   * (src/kv-events/pending-blocks.ts, prefillWorkTokens).
   */
  readonly activeWork?: ReadonlyMap<string, number> | undefined;
  /** Prompt tokens each such engine can take before it evicts what it holds (src/kv-events). */
  readonly roomTokens?: ReadonlyMap<string, number> | undefined;
  /** The prompt's length in tokens, when the gateway renders it for KV events. */
  readonly promptTokens?: number | undefined;
  /** The prompt opens a conversation (src/kv-events/prompt-blocks.ts, PromptBlocks). */
  readonly opensConversation?: boolean | undefined;
  /** Requests other gateway replicas have in flight on each such engine, when they share their sends (src/kv-events). */
  readonly otherReplicasLoad?: ReadonlyMap<string, number> | undefined;
}

/** How the decision is counted: a hit of the session's binding, a miss, or a spill (a miss that kept it). */
export type PlacementOutcome = "hit" | "miss" | "spill";

export interface PlacementDecision<T extends SchedulingCandidate> {
  /** Undefined when no candidate can take the request (the effects still apply). */
  readonly selection: Selection<T> | undefined;
  /** What the bindings must become, in order. */
  readonly effects: readonly BindingEffect[];
  readonly outcome: PlacementOutcome;
}

const NO_EFFECTS: readonly BindingEffect[] = [];

/** Whether placing this request reads the session's binding (so the caller looks it up first). */
export function usesBinding(settings: PlacementSettings, sessionId: string | undefined): sessionId is string {
  return settings.policy === undefined && sessionId !== undefined && settings.ttlMs > 0;
}

/**
 * Decides one attempt. Reads nothing but its arguments (the balancer and a policy keep their own state: a
 * round-robin position, a cache index) and writes nothing: the effects say what the store must do.
 */
export function decidePlacement<T extends SchedulingCandidate>(
  settings: PlacementSettings,
  input: PlacementInput<T>,
): PlacementDecision<T> {
  const { sessionId, tier, candidates, exclude, hints, nowMs } = input;
  if (settings.policy !== undefined) {
    const decision = settings.policy.select(
      { tier, text: hints.routingText ?? "", promptBytes: hints.promptBytes ?? "", exclude },
      candidates,
      nowMs,
    );
    const selection =
      decision === undefined
        ? undefined
        : { backend: decision.backend, affinityHit: false, reason: decision.reason };
    return { selection, effects: NO_EFFECTS, outcome: "miss" };
  }
  const kv = kvContext(settings, input);
  if (!usesBinding(settings, sessionId)) {
    if (sessionId === undefined && settings.ttlMs > 0 && kv !== undefined) {
      const backend = cheapestEngine(kv, hints.prefixKey ?? hashSession(""));
      if (backend !== undefined)
        return {
          selection: { backend, affinityHit: false, reason: "kv_prefix" },
          effects: NO_EFFECTS,
          outcome: "miss",
        };
    }
    if (sessionId === undefined && settings.ttlMs > 0 && settings.sessionless === "prefix") {
      const prefixKey = hints.prefixKey;
      if (prefixKey !== undefined) return placeByPrefix(settings, prefixKey, input);
    }
    const backend = settings.balancer.pick(tier, candidates, (c) => c.state === "up" && !exclude.has(c.id));
    const reason = sessionId === undefined ? "no_session" : "affinity_disabled";
    const selection = backend === undefined ? undefined : ({ backend, affinityHit: false, reason } as const);
    return { selection, effects: NO_EFFECTS, outcome: "miss" };
  }

  const bound = input.binding;
  const expiresAtMs = nowMs + settings.ttlMs;
  let effects: BindingEffect[] | undefined;
  let reason: SelectionReason = exclude.size > 0 ? "failover" : "new_session";
  if (typeof bound === "string") {
    const pinned = findById(candidates, bound);
    if (pinned === undefined) {
      reason = "rebind_tier_changed";
    } else if (pinned.state !== "down" && !exclude.has(pinned.id)) {
      if (kv !== undefined) {
        const moveMin = settings.kvMoveMinTokens ?? DEFAULT_KV_MOVE_MIN_TOKENS;
        const moved = betterHolder(kv, hashSession(sessionId), pinned, moveMin, true);
        if (moved !== undefined) {
          const placement = hashSession(sessionId);
          return {
            selection: { backend: moved, affinityHit: false, reason: "kv_moved" },
            effects: [{ kind: "bind", sessionId, placement, backendId: moved.id, expiresAtMs }],
            outcome: "miss",
          };
        }
      }
      const refresh: readonly BindingEffect[] = [{ kind: "refresh", sessionId, expiresAtMs }];
      // The hit path: a free slot (always, under uniform load) means no pipeline.
      if (settings.loadFactor > 0 && !hasFreeSlot(pinned)) {
        const spill =
          kv !== undefined
            ? cheaperSpill(kv, hashSession(sessionId), pinned)
            : spillTarget(settings, sessionId, input);
        if (spill !== undefined) {
          return {
            selection: { backend: spill, affinityHit: false, reason: "spill" },
            effects: refresh,
            outcome: "spill",
          };
        }
      }
      return {
        selection: { backend: pinned, affinityHit: true, reason: "affinity_hit" },
        effects: refresh,
        outcome: "hit",
      };
    } else {
      // Down without the health event having reached us yet, or excluded because it failed this request
      // and nobody reported the failure: either way a binding its engine broke (counted by the store).
      effects = [{ kind: "break", sessionId, backendId: pinned.id, tier }];
      if (exclude.size === 0) reason = "rebind_backend_down";
    }
  } else if (bound === EXPIRED) {
    reason = "rebind_expired";
  } else if (bound === BROKEN && exclude.size === 0) {
    reason = "rebind_backend_down";
  }

  const placement = hashSession(sessionId);
  // Where engines' KV events say some engine holds part of the prompt, the cheapest engine (kv-placement.ts).
  let winner = kv === undefined ? undefined : cheapestEngine(kv, placement);
  winner ??=
    settings.loadFactor > 0
      ? placeSession(settings, placement, { tier, sessionId, prefixKey: undefined, exclude }, input)
      : rendezvousWinner(placement, candidates, (c) => c.state === "up" && !exclude.has(c.id));
  if (winner === undefined) return { selection: undefined, effects: effects ?? NO_EFFECTS, outcome: "miss" };
  const bind: BindingEffect = { kind: "bind", sessionId, placement, backendId: winner.id, expiresAtMs };
  if (effects === undefined) effects = [bind];
  else effects.push(bind);
  return { selection: { backend: winner, affinityHit: false, reason }, effects, outcome: "miss" };
}

/**
 * A request without a session id, placed like a bound session's turn with its prefix key's rendezvous
 * winner as its home (nothing is bound): home while it can start the request now, else the first of the
 * key's ranking that can and is within the bound, else (none within the bound can) the first within it.
 * The home is where the template's prefix is cached; a request sent elsewhere while the home has a free
 * slot would prefill the whole shared prompt again for no gain in waiting (docs/affinity.md).
 */
function placeByPrefix<T extends SchedulingCandidate>(
  settings: PlacementSettings,
  prefixKey: Hash64,
  input: PlacementInput<T>,
): PlacementDecision<T> {
  const { tier, candidates, exclude } = input;
  const home = rendezvousWinner(prefixKey, candidates, (c) => c.state === "up" && !exclude.has(c.id));
  if (home === undefined) return { selection: undefined, effects: NO_EFFECTS, outcome: "miss" };
  let backend = home;
  if (settings.loadFactor > 0 && !hasFreeSlot(home)) {
    const request: PlacementRequest = { tier, sessionId: undefined, prefixKey, exclude };
    const state = stateFor(settings, prefixKey, candidates, input.nowMs);
    backend =
      runPipeline(spillPipeline, request, state, candidates) ??
      runPipeline(boundedRendezvousPipeline, request, state, candidates) ??
      home;
  }
  return {
    selection: { backend, affinityHit: false, reason: "prefix" },
    effects: NO_EFFECTS,
    outcome: "miss",
  };
}

/**
 * A session's placement (sessionPlacementPipeline). When the exclusions leave no backend within the bound
 * (the bound always admits one up backend, but that one may have failed this request), the plain
 * rendezvous winner among the rest: a request is better served late than refused.
 */
function placeSession<T extends SchedulingCandidate>(
  settings: PlacementSettings,
  key: Hash64,
  request: PlacementRequest,
  input: PlacementInput<T>,
): T | undefined {
  const { exclude } = request;
  const { candidates } = input;
  const winner = rendezvousWinner(key, candidates, (c) => c.state === "up" && !exclude.has(c.id));
  if (winner === undefined) return undefined;
  const state = stateFor(settings, key, candidates, input.nowMs);
  // The common case, without allocating: the key's winner is within its bound and can start the request
  // now, so it is what the pipeline picks (its top score passes the filters). Otherwise the pipeline walks
  // the ranking.
  if (hasFreeSlot(winner) && loadOf(winner) + 1 <= loadBound(winner, state)) return winner;
  return runPipeline(sessionPlacementPipeline, request, state, candidates) ?? winner;
}

/** Where a bound session's request may spill: free now, within the bound, best of its ranking. */
function spillTarget<T extends SchedulingCandidate>(
  settings: PlacementSettings,
  sessionId: string,
  input: PlacementInput<T>,
): T | undefined {
  const { tier, candidates, exclude } = input;
  const state = stateFor(settings, hashSession(sessionId), candidates, input.nowMs);
  return runPipeline(spillPipeline, { tier, sessionId, prefixKey: undefined, exclude }, state, candidates);
}

function stateFor(
  settings: PlacementSettings,
  key: Hash64,
  candidates: readonly SchedulingCandidate[],
  nowMs: number,
) {
  return placementState(key, candidates, {
    loadFactor: settings.loadFactor,
    nowMs,
    engineSignalMaxAgeMs: settings.engineSignalMaxAgeMs,
  });
}

/** The KV-event view of this decision, when an engine that may take it holds some of the prompt. */
function kvContext<T extends SchedulingCandidate>(
  settings: PlacementSettings,
  input: PlacementInput<T>,
): KvPlacementContext<T> | undefined {
  const { cachedTokens, candidates, exclude } = input;
  if (!anyCandidateHolds(cachedTokens, candidates, exclude)) return undefined;
  return {
    tier: input.tier,
    sessionId: input.sessionId,
    candidates,
    exclude,
    cachedTokens,
    activeWork: input.activeWork,
    prefillContextWeight: settings.kvPrefillContextWeight ?? 0,
    roomTokens: input.roomTokens,
    promptTokens: input.promptTokens,
    opensConversation: input.opensConversation,
    otherReplicasLoad: onUpBackends(input.otherReplicasLoad, candidates),
    loadFactor: settings.loadFactor,
    nowMs: input.nowMs,
    engineSignalMaxAgeMs: settings.engineSignalMaxAgeMs,
  };
}

function findById<T extends SchedulingCandidate>(candidates: readonly T[], id: string): T | undefined {
  for (const candidate of candidates) if (candidate.id === id) return candidate;
  return undefined;
}
