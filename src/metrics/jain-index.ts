// Jain's fairness index of shares: 1 when all are equal, 1/n when one flow has everything.

/** (sum x)^2 / (n * sum x^2) over the shares given; 1 for no shares (nobody is treated unfairly). */
export function jainIndex(shares: readonly number[]): number {
  let sum = 0;
  let squares = 0;
  for (const x of shares) {
    sum += x;
    squares += x * x;
  }
  return shares.length === 0 || squares === 0 ? 1 : (sum * sum) / (shares.length * squares);
}
