// Filter: the load bound for a request placed by KV events, waived on engines holding most of its prompt.
import { boundedLoadFilter } from "./filter-bounded-load.js";
import { holdsHalf } from "./score-kv-cost.js";
import type { Filter } from "./types.js";

/**
 * Backends within the load bound (filter-bounded-load.ts), and any backend holding at least half the prompt by
 * its KV events. A new conversation finds at most a shared prefix (a system prompt) anywhere, worth a few
 * seconds of prefill once, while the engine it lands on serves every later turn of it: measured without the
 * bound, the engines that held the shared prefix first took nearly every new session (one of four engines got
 * none), so each of their prefills queued behind the others'. A continued conversation (most of its prompt on
 * one engine) keeps its engine however loaded it is: the KV cost weighs that engine's queue against its cache.
 * Without the prompt's length (engines matched by session only), what an engine holds is the session's own.
 */
export const kvBoundedLoadFilter: Filter = (request, state, candidates) => {
  const within = boundedLoadFilter(request, state, candidates);
  if (within.length === candidates.length) return within;
  const prompt = request.promptTokens;
  const holdsMost = (id: string): boolean => {
    const held = request.cachedTokens?.get(id) ?? 0;
    return prompt === undefined ? held > 0 : holdsHalf(held, prompt);
  };
  return candidates.filter((c) => within.includes(c) || holdsMost(c.id));
};
