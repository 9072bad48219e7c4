// A prompt placed on an engine and sent at once (a placement without a binding write to wait for).
import type { KvCacheView, ReleasePending } from "../../src/kv-events/kv-cache-view.js";
import type { PromptBlocks } from "../../src/kv-events/prompt-blocks.js";

export function sendNow(
  view: KvCacheView,
  backendId: string,
  blocks: PromptBlocks,
  expectedTokens?: number,
): ReleasePending | undefined {
  const placed = view.place(backendId, blocks, expectedTokens);
  placed?.markSent();
  return placed?.release;
}
