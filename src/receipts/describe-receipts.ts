// A session's receipts as the admin API shows them (GET /admin/sessions/{id}), in the client's snake_case.
import type { SessionReceipts } from "./receipt-memory.js";

export function describeReceipts(entry: SessionReceipts | undefined): Record<string, unknown> {
  if (entry === undefined) return { last_turn: null, receipts: [] };
  const { last } = entry;
  return {
    last_turn: {
      backend_id: last.backendId,
      tier: last.tier,
      items: last.items,
      prompt_tokens: last.promptTokens,
      tokens: last.tokens,
      at: new Date(last.atMs).toISOString(),
    },
    // Newest first: the turn an operator asks about is usually the last one.
    receipts: [...entry.receipts].reverse().map((r) => ({
      at: new Date(r.atMs).toISOString(),
      backend_id: r.backendId,
      tier: r.tier,
      reusable_tokens: r.reusableTokens,
      cached_tokens: r.cachedTokens,
      lost_tokens: r.lostTokens,
      lost_cause: r.lostCause,
      expected_cached_tokens: r.expectedCachedTokens,
    })),
  };
}
