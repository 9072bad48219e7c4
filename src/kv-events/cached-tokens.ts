// What placement asks of the KV-event view for one request: tokens of its prompt held by each candidate engine.
import type { KvCacheView } from "./kv-cache-view.js";
import type { PromptBlocks } from "./prompt-blocks.js";

/** vLLM's default block size: assumed for an engine that has not stored a block yet (its events say otherwise). */
export const DEFAULT_BLOCK_SIZE_TOKENS = 16;

/**
 * The block size to cut a prompt by for this engine: its events' once it has stored a block, else vLLM's default,
 * so that the first prompts sent to a fresh engine are tracked as pending too.
 */
export function blockSizeFor(view: KvCacheView, backendId: string): number {
  const size = view.blockSizeOf(backendId);
  return size > 0 ? size : DEFAULT_BLOCK_SIZE_TOKENS;
}

/**
 * Tokens held per candidate that publishes events (candidates without events are absent), or undefined when
 * none of them publishes. `blocksOf` gives the prompt's blocks for a block size (undefined: not tokenizable).
 */
export function cachedTokensOf(
  view: KvCacheView,
  candidateIds: Iterable<string>,
  blocksOf: ((blockSizeTokens: number) => PromptBlocks | undefined) | undefined,
  sessionId: string | undefined,
): Map<string, number> | undefined {
  let held: Map<string, number> | undefined;
  for (const id of candidateIds) {
    if (!view.has(id)) continue;
    const size = blockSizeFor(view, id);
    const blocks = blocksOf?.(size);
    const prefix = view.held(id, blocks, sessionId);
    if (prefix === undefined) continue;
    // A session's chain may be longer than this prompt's reusable part (an edited conversation): cap it.
    const tokens = blocks === undefined ? prefix.tokens : Math.min(prefix.tokens, blocks.keys.length * size);
    (held ??= new Map()).set(id, tokens);
  }
  return held;
}

/** The prompt's blocks for the first candidate that publishes events, when it renders (its length, its opening). */
export function renderedPromptOf(
  view: KvCacheView,
  candidateIds: Iterable<string>,
  blocksOf: ((blockSizeTokens: number) => PromptBlocks | undefined) | undefined,
): PromptBlocks | undefined {
  if (blocksOf === undefined) return undefined;
  for (const id of candidateIds) if (view.has(id)) return blocksOf(blockSizeFor(view, id));
  return undefined;
}

/** One number per candidate that publishes events, or undefined when none of them does. */
function perEngine(
  candidateIds: Iterable<string>,
  of: (backendId: string) => number | undefined,
): Map<string, number> | undefined {
  let out: Map<string, number> | undefined;
  for (const id of candidateIds) {
    const tokens = of(id);
    if (tokens !== undefined) (out ??= new Map()).set(id, tokens);
  }
  return out;
}

/**
 * The prefill each candidate that publishes events has still to do for what this gateway sent it (the work ahead
 * of the request there), in tokens at no context (pending-blocks.ts, prefillWorkTokens); undefined when none of
 * them publishes.
 */
export function activeWorkOf(
  view: KvCacheView,
  candidateIds: Iterable<string>,
  contextWeight: number,
): Map<string, number> | undefined {
  return perEngine(candidateIds, (id) => view.activeWork(id, contextWeight));
}

/**
 * The other replicas' requests in flight on each candidate that publishes events (kv-cache-view.ts,
 * otherReplicasRequests), or undefined when the fleet does not share its sends.
 */
export function otherReplicasLoadOf(
  view: KvCacheView,
  candidateIds: Iterable<string>,
): Map<string, number> | undefined {
  return perEngine(candidateIds, (id) => view.otherReplicasRequests(id));
}

/** Prompt tokens each candidate that publishes events can take before it evicts (kv-cache-view.ts, roomTokens). */
export function roomTokensOf(
  view: KvCacheView,
  candidateIds: Iterable<string>,
): Map<string, number> | undefined {
  return perEngine(candidateIds, (id) => view.roomTokens(id));
}
