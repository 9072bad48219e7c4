// Splits bytes at arbitrary cut points: relays must give the same output however the engine's reads fall.

/** Splits `bytes` at the given cut points (any positions, duplicates allowed). */
export function split(bytes: Buffer, cuts: number[]): Buffer[] {
  const at = [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b);
  const parts: Buffer[] = [];
  let from = 0;
  for (const cut of [...at, bytes.length]) {
    parts.push(bytes.subarray(from, cut));
    from = cut;
  }
  return parts;
}
