// Percentiles and summaries against data whose answers are known.
import { describe, expect, it } from "vitest";
import { percentile, ratio } from "../../src/study/stats.js";

describe("statistics", () => {
  it("interpolates percentiles linearly between order statistics (numpy's default)", () => {
    const data = [15, 20, 35, 40, 50];
    expect(percentile(data, 0)).toBe(15);
    expect(percentile(data, 100)).toBe(50);
    expect(percentile(data, 50)).toBe(35);
    expect(percentile(data, 40)).toBeCloseTo(29, 10); // rank 1.6: 20 + 0.6 * 15
    expect(percentile([3, 1, 2, 4], 50)).toBe(2.5);
    expect(
      percentile(
        Array.from({ length: 101 }, (_, i) => i),
        95,
      ),
    ).toBe(95);
    expect(percentile([7], 95)).toBe(7);
    expect(Number.isNaN(percentile([], 50))).toBe(true);
    expect(() => percentile([1], 101)).toThrow(RangeError);
  });

  it("does not reorder its input", () => {
    const data = [5, 1, 4];
    percentile(data, 50);
    expect(data).toEqual([5, 1, 4]);
  });

  it("gives p95 of 1..10 as numpy does, and ratios that never divide by zero", () => {
    expect(percentile([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 95)).toBeCloseTo(9.55, 10);
    expect(ratio(60, 72)).toBeCloseTo(0.8333, 4);
    expect(ratio(1, 0)).toBe(0);
  });
});
