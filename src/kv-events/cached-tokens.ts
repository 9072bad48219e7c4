// What placement asks of the KV-event view for one request: tokens of its prompt held by each candidate engine.
import type { KvCacheView } from "./kv-cache-view.js";
import type { PromptBlocks } from "./prompt-blocks.js";

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
    const size = view.blockSizeOf(id);
    const blocks = size > 0 ? blocksOf?.(size) : undefined;
    const prefix = view.held(id, blocks, sessionId);
    if (prefix === undefined) continue;
    // A session's chain may be longer than this prompt's reusable part (an edited conversation): cap it.
    const tokens = blocks === undefined ? prefix.tokens : Math.min(prefix.tokens, blocks.keys.length * size);
    (held ??= new Map()).set(id, tokens);
  }
  return held;
}
