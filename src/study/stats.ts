// Small-sample statistics for study reports: exact percentiles (linear interpolation) and ratios.

/** The q-th percentile (0-100) of `values` by linear interpolation between order statistics (numpy's default). */
export function percentile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  if (q < 0 || q > 100) throw new RangeError(`percentile ${q} is outside 0-100`);
  const sorted = [...values].sort((a, b) => a - b);
  const rank = (q / 100) * (sorted.length - 1);
  const low = Math.floor(rank);
  const high = Math.ceil(rank);
  return sorted[low]! + (sorted[high]! - sorted[low]!) * (rank - low);
}

/** hits / total as a fraction, 0 when there is nothing to divide. */
export function ratio(hits: number, total: number): number {
  return total === 0 ? 0 : hits / total;
}
