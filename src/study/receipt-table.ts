// The table every study report ends with: per condition, binding hits next to what the engines reused, the
// tokens the route receipts say were lost and why, and TTFT.
import { analyze, count, pct, sec } from "./analysis.js";
import type { StudyResult, Table } from "./result.js";
import type { RequestRecord } from "./session-runner.js";

export const RECEIPT_TABLE_TITLE = "Cache reuse, tokens lost by cause, and TTFT (route receipts)";

export interface ReceiptNumbers {
  /** Turns that carried a receipt. */
  receipted: number;
  reusableTokens: number;
  lostTokens: number;
  /** Lost tokens by cause, causes that lost nothing left out. */
  lostByCause: Record<string, number>;
  /** Turns by cause (every cause, `none` included). */
  turnsByCause: Record<string, number>;
}

export function receiptNumbers(records: readonly RequestRecord[]): ReceiptNumbers {
  const numbers: ReceiptNumbers = {
    receipted: 0,
    reusableTokens: 0,
    lostTokens: 0,
    lostByCause: {},
    turnsByCause: {},
  };
  for (const r of records) {
    if (r.lostCause === undefined || r.lostCause === null) continue;
    numbers.receipted++;
    numbers.reusableTokens += r.reusableTokens ?? 0;
    const lost = r.lostTokens ?? 0;
    numbers.lostTokens += lost;
    numbers.turnsByCause[r.lostCause] = (numbers.turnsByCause[r.lostCause] ?? 0) + 1;
    if (lost > 0) numbers.lostByCause[r.lostCause] = (numbers.lostByCause[r.lostCause] ?? 0) + lost;
  }
  return numbers;
}

/** "evicted 1,024; spill 96", largest first; "-" when nothing was lost. */
export function lostByCauseText(lostByCause: Record<string, number>): string {
  const entries = Object.entries(lostByCause).sort((a, b) => b[1] - a[1]);
  return entries.length === 0 ? "-" : entries.map(([cause, n]) => `${cause} ${count(n)}`).join("; ");
}

export function receiptTable(records: readonly RequestRecord[], timeScale: number): Table {
  const conditions = [...new Set(records.map((r) => r.condition))];
  return {
    title: RECEIPT_TABLE_TITLE,
    columns: [
      "condition",
      "requests",
      "binding hits",
      "engine prefix-cache reuse",
      "reusable tokens",
      "lost tokens",
      "lost by cause",
      "prompt tokens not from cache",
      "TTFT p50",
      "TTFT p95",
    ],
    rows: conditions.map((condition) => {
      const subset = records.filter((r) => r.condition === condition);
      const n = analyze(subset, timeScale);
      const receipts = receiptNumbers(subset);
      return [
        condition,
        n.requests,
        pct(n.bindingHitRate),
        pct(n.prefixCacheHitRate),
        receipts.receipted === 0 ? "-" : count(receipts.reusableTokens),
        receipts.receipted === 0 ? "-" : lostShareText(receipts),
        receipts.receipted === 0 ? "-" : lostByCauseText(receipts.lostByCause),
        count(n.promptTokens - n.cachedTokens),
        sec(n.ttftP50Seconds),
        sec(n.ttftP95Seconds),
      ];
    }),
  };
}

/** "900 (52.9%)": the lost tokens and their share of the reusable ones (the base they are counted over). */
export function lostShareText(receipts: ReceiptNumbers): string {
  const share =
    receipts.reusableTokens === 0 ? "" : ` (${pct(receipts.lostTokens / receipts.reusableTokens)})`;
  return `${count(receipts.lostTokens)}${share}`;
}

/**
 * What the lost tokens are counted over, said under every receipts table: conditions differ in how many turns
 * the gateway can tie to a previous turn, so their lost tokens have different bases.
 */
export const LOST_TOKENS_NOTE =
  "Receipts table: 'reusable tokens' counts only turns the gateway could tie to the same session's previous " +
  "turn, and 'lost tokens' is a share of those, so conditions that see fewer sessions (no session signal, " +
  "fresh ids) count their losses over a smaller base. 'Prompt tokens not from cache' counts every prompt " +
  "token the engines recomputed, over the same workload in every condition: compare conditions by it.";

/** The study's result with the receipts table added (every study's report shows it). */
export function withReceiptTable(result: StudyResult): StudyResult {
  if (result.records.length === 0 || result.tables.some((t) => t.title === RECEIPT_TABLE_TITLE))
    return result;
  return {
    ...result,
    tables: [...result.tables, receiptTable(result.records, result.timeScale)],
    notes: [...result.notes, LOST_TOKENS_NOTE],
  };
}
