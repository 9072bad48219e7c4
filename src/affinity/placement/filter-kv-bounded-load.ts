// Filter: the load bound for a request placed by KV events, waived on engines holding the conversation itself.
import { boundedLoadFilter } from "./filter-bounded-load.js";
import { holdsConversation } from "./score-kv-cost.js";
import type { Filter } from "./types.js";

/**
 * Backends within the load bound (filter-bounded-load.ts), and any backend holding the request's conversation
 * (holdsConversation: a continued conversation, at least half of it held there). A continued conversation keeps
 * its engine however loaded it is: the KV cost weighs that engine's queue against its cache. A new conversation
 * finds at most an opening others share (a system prompt, a sub-agent's instructions) anywhere, worth a few seconds
 * of prefill once, while the engine it lands on serves every later turn of it, so it stays within the bound even
 * where the opening is most of its prompt. Measured without the bound, the engines holding the shared system prompt
 * first took nearly every new session; with the bound waived for a sub-agent's first call (its 6,000-token
 * instructions are nearly all of it), a burst's sub-agents all went to the engine holding the instructions and
 * their later calls queued there (docs/kv-events.md, ninth round).
 */
export const kvBoundedLoadFilter: Filter = (request, state, candidates) => {
  const within = boundedLoadFilter(request, state, candidates);
  if (within.length === candidates.length) return within;
  return candidates.filter(
    (c) => within.includes(c) || holdsConversation(request, request.cachedTokens?.get(c.id) ?? 0),
  );
};
