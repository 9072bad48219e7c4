// Placement by what engines hold, where engines publish KV events (src/kv-events): the rules decide.ts applies.
//
// - A request without a session goes to the engine holding the longest prefix of its prompt, within the load
//   bound (ties: the key's rendezvous order); when no engine holds any of it, placement is as without events.
// - A session's engine (bound, or chosen by rendezvous) is left for another only when that one, within the
//   bound (and with a free slot, for a bound session), holds at least `move_min_tokens` more of the prompt:
//   the session's engine evicted it, or the session's blocks are elsewhere (a spill, a forgotten binding).
//   Below that gain the session stays: one more prefill there costs less than scattering sessions.
// - A spill goes to the engine free now and within the bound that holds most of the prompt.
// Engines without events hold "nothing known" here, so a tier without events places exactly as before.
import type { SchedulingCandidate } from "./decide.js";
import type { Hash64 } from "./hash.js";
import { placementState } from "./placement/load.js";
import { runPipeline } from "./placement/pipeline.js";
import { kvPrefixPipeline, kvSpillPipeline } from "./placement/pipelines.js";
import type { PlacementRequest } from "./placement/types.js";

/** The default of affinity.kv_events.move_min_tokens. */
export const DEFAULT_KV_MOVE_MIN_TOKENS = 2048;

export interface KvPlacementContext<T extends SchedulingCandidate> {
  readonly tier: string;
  readonly sessionId: string | undefined;
  readonly candidates: readonly T[];
  readonly exclude: ReadonlySet<string>;
  readonly cachedTokens: ReadonlyMap<string, number>;
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

function best<T extends SchedulingCandidate>(
  context: KvPlacementContext<T>,
  key: Hash64,
  spill: boolean,
): T | undefined {
  const request: PlacementRequest = {
    tier: context.tier,
    sessionId: context.sessionId,
    prefixKey: undefined,
    exclude: context.exclude,
    cachedTokens: context.cachedTokens,
  };
  const state = placementState(key, context.candidates, {
    loadFactor: context.loadFactor,
    nowMs: context.nowMs,
    engineSignalMaxAgeMs: context.engineSignalMaxAgeMs,
  });
  return runPipeline(spill ? kvSpillPipeline : kvPrefixPipeline, request, state, context.candidates);
}

/** The engine holding the longest prefix within the bound (a request without a session). */
export function longestCachedPrefix<T extends SchedulingCandidate>(
  context: KvPlacementContext<T>,
  key: Hash64,
): T | undefined {
  return best(context, key, false);
}

/** The engine free now, within the bound, holding most of the prompt (a spill). */
export function cachedSpillTarget<T extends SchedulingCandidate>(
  context: KvPlacementContext<T>,
  key: Hash64,
): T | undefined {
  return best(context, key, true);
}

/**
 * Another engine worth moving the session to from `current`: the best holder (free now, for a bound session's
 * `current`), if it holds at least `moveMinTokens` more than `current`. Undefined: stay.
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
  const other = best(context, key, needFreeSlot);
  if (other === undefined || other.id === current.id) return undefined;
  return (context.cachedTokens.get(other.id) ?? 0) - here >= moveMinTokens ? other : undefined;
}
