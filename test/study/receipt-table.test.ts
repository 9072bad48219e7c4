// The receipts table every study report ends with: per condition, binding hits, engine reuse, lost tokens by cause, TTFT.
import { describe, expect, it } from "vitest";
import { RECEIPT_TABLE_TITLE, receiptNumbers, withReceiptTable } from "../../src/study/receipt-table.js";
import type { StudyResult } from "../../src/study/result.js";
import { studyRecord } from "./records.js";

const record = studyRecord;

const records = [
  record("on", 1, { reusableTokens: 0, lostTokens: 0, lostCause: "new_session" }),
  record("on", 2, { reusableTokens: 800, lostTokens: 0, lostCause: "none" }),
  record("off", 1, { reusableTokens: 0, lostTokens: 0, lostCause: "new_session" }),
  record("off", 2, { reusableTokens: 800, lostTokens: 800, lostCause: "rerouted", cachedTokens: 0 }),
  record("off", 3, { reusableTokens: 900, lostTokens: 100, lostCause: "evicted", cachedTokens: 800 }),
  record("old", 1, {}), // a gateway without receipts
];

describe("receipt table", () => {
  it("sums reusable and lost tokens, by cause, over the receipted turns only", () => {
    expect(receiptNumbers(records.filter((r) => r.condition === "off"))).toEqual({
      receipted: 3,
      reusableTokens: 1700,
      lostTokens: 900,
      lostByCause: { rerouted: 800, evicted: 100 },
      turnsByCause: { new_session: 1, rerouted: 1, evicted: 1 },
    });
  });

  it("is added once to a study's tables, one row per condition", () => {
    const result: StudyResult = {
      study: "x",
      title: "x",
      description: "",
      seed: 1,
      timeScale: 1,
      configs: [],
      records,
      tables: [],
      charts: [],
      checks: [],
      notes: [],
      data: {},
    };
    const once = withReceiptTable(result);
    expect(withReceiptTable(once).tables).toHaveLength(1);
    const table = once.tables[0]!;
    expect(table.title).toBe(RECEIPT_TABLE_TITLE);
    const rows = Object.fromEntries(table.rows.map((row) => [row[0], row]));
    // Lost tokens with the base they are a share of; beside them what every condition shares a base for.
    expect(rows["off"]!.slice(2, 8)).toEqual([
      "66.7%",
      "26.7%",
      "1,700",
      "900 (52.9%)",
      "rerouted 800; evicted 100",
      "2,200",
    ]);
    expect(rows["on"]!.slice(4, 7)).toEqual(["800", "0 (0.0%)", "-"]);
    expect(rows["old"]!.slice(4, 7)).toEqual(["-", "-", "-"]);
    expect(once.notes.some((n) => n.includes("Prompt tokens not from cache"))).toBe(true);
  });
});
