// Placement by what engines hold, where engines publish KV events (src/kv-events): the rules decide.ts applies.
//
// Every rule ranks engines by one cost, in prompt tokens (src/affinity/placement/score-kv-cost.ts): twice what
// the request must prefill there (the prompt less the prefix the engine holds, pending blocks included) plus the
// prefill work already sent there and not yet done. Equal costs go to the least loaded engine, then by the key's
// rendezvous order, so engines holding the same prefix (the shared system prompt) share the new sessions.
// - A request without a session goes to the cheapest engine, as does a session being placed (new, rebinding,
//   failing over), of the engines within the load bound or holding its conversation (a continued one, half its
//   prompt or more; placement/filter-kv-bounded-load.ts): a new conversation's shared opening does not pull it
//   onto a loaded engine, however much of its prompt the opening is; a continued one stays with its cache.
// - A bound session leaves its engine only for one that holds at least `move_min_tokens` more of its prompt and
//   costs less (its engine evicted it, or its blocks are elsewhere): one more prefill on its own engine costs
//   less than scattering sessions, and a move for load alone would strand the session's cache.
// - A bound session whose engine has no free slot spills to the cheapest engine free now (within the load bound
//   or holding its conversation, as a move's target must be too), if that costs less than waiting at home;
//   otherwise it waits for a slot where its cache is.
// When no engine that may take the request holds any of it, placement is as without events; engines without
// events hold "nothing known" and have no known work here.
import type { SchedulingCandidate } from "./decide.js";
import type { Hash64 } from "./hash.js";
import { placementState } from "./placement/load.js";
import { runPipeline } from "./placement/pipeline.js";
import { kvCostPipeline, kvPlacePipeline, kvSpillPipeline } from "./placement/pipelines.js";
import type { Pipeline } from "./placement/types.js";
import { kvCostTokens } from "./placement/score-kv-cost.js";
import type { PlacementRequest } from "./placement/types.js";

/** The default of affinity.kv_events.move_min_tokens. */
export const DEFAULT_KV_MOVE_MIN_TOKENS = 2048;

export interface KvPlacementContext<T extends SchedulingCandidate> {
  readonly tier: string;
  readonly sessionId: string | undefined;
  readonly candidates: readonly T[];
  readonly exclude: ReadonlySet<string>;
  readonly cachedTokens: ReadonlyMap<string, number>;
  readonly activeWork: ReadonlyMap<string, number> | undefined;
  readonly prefillContextWeight: number;
  readonly roomTokens?: ReadonlyMap<string, number> | undefined;
  readonly promptTokens?: number | undefined;
  readonly opensConversation?: boolean | undefined;
  readonly otherReplicasLoad?: ReadonlyMap<string, number> | undefined;
  readonly loadFactor: number;
  readonly nowMs: number;
  readonly engineSignalMaxAgeMs: number;
}

/** Whether any candidate that may take the request holds some of the prompt. */
export function anyCandidateHolds(
  cachedTokens: ReadonlyMap<string, number> | undefined,
  candidates: readonly SchedulingCandidate[],
  exclude: ReadonlySet<string>,
): cachedTokens is ReadonlyMap<string, number> {
  if (cachedTokens === undefined || cachedTokens.size === 0) return false;
  for (const c of candidates) if (!exclude.has(c.id) && (cachedTokens.get(c.id) ?? 0) > 0) return true;
  return false;
}

function requestOf<T extends SchedulingCandidate>(context: KvPlacementContext<T>): PlacementRequest {
  return {
    tier: context.tier,
    sessionId: context.sessionId,
    prefixKey: undefined,
    exclude: context.exclude,
    cachedTokens: context.cachedTokens,
    activeWork: context.activeWork,
    prefillContextWeight: context.prefillContextWeight,
    roomTokens: context.roomTokens,
    promptTokens: context.promptTokens,
    opensConversation: context.opensConversation,
    otherReplicasLoad: context.otherReplicasLoad,
  };
}

function cheapest<T extends SchedulingCandidate>(
  context: KvPlacementContext<T>,
  key: Hash64,
  pipeline: Pipeline,
  candidates: readonly T[] = context.candidates,
): T | undefined {
  const state = placementState(key, context.candidates, {
    loadFactor: context.loadFactor,
    nowMs: context.nowMs,
    engineSignalMaxAgeMs: context.engineSignalMaxAgeMs,
  });
  return runPipeline(pipeline, requestOf(context), state, candidates);
}

/** The request's cost on an engine (prompt tokens to compute plus work ahead, less the prompt's length). */
export function kvCostOf<T extends SchedulingCandidate>(
  context: KvPlacementContext<T>,
  candidate: T,
): number {
  return kvCostTokens(requestOf(context), candidate);
}

/** The cheapest engine (a request without a session, or a session being placed). */
export function cheapestEngine<T extends SchedulingCandidate>(
  context: KvPlacementContext<T>,
  key: Hash64,
): T | undefined {
  return cheapest(context, key, kvPlacePipeline);
}

/**
 * Where a bound session spills from `home`, which has no free slot: the cheapest engine free now, when it costs
 * less than `home` (whose queue is counted in its cost). Undefined: wait at home.
 */
export function cheaperSpill<T extends SchedulingCandidate>(
  context: KvPlacementContext<T>,
  key: Hash64,
  home: T,
): T | undefined {
  const target = cheapest(context, key, kvSpillPipeline);
  if (target === undefined || target.id === home.id) return undefined;
  return kvCostOf(context, target) < kvCostOf(context, home) ? target : undefined;
}

/**
 * Another engine worth moving the session to from `current`: of the engines holding at least `moveMinTokens`
 * more of the prompt than `current` (free now, for a bound session), the cheapest, if it costs less than
 * `current`. Undefined: stay.
 */
export function betterHolder<T extends SchedulingCandidate>(
  context: KvPlacementContext<T>,
  key: Hash64,
  current: T,
  moveMinTokens: number,
  needFreeSlot: boolean,
): T | undefined {
  const here = context.cachedTokens.get(current.id);
  if (here === undefined) return undefined; // the current engine publishes no events: nothing to compare
  const holders = context.candidates.filter(
    (c) => c.id !== current.id && (context.cachedTokens.get(c.id) ?? 0) - here >= moveMinTokens,
  );
  if (holders.length === 0) return undefined;
  const other = cheapest(context, key, needFreeSlot ? kvSpillPipeline : kvCostPipeline, holders);
  if (other === undefined) return undefined;
  return kvCostOf(context, other) < kvCostOf(context, current) ? other : undefined;
}
