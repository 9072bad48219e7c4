// Seeded randomness as an injected dependency: no Math.random in the core, so runs replay exactly.

export interface Random {
  /** A float in [0, 1). */
  next(): number;
}

/** mulberry32: a small, fast, well-distributed 32-bit PRNG; plenty for tie-breaks and workloads. */
export class SeededRandom implements Random {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  next(): number {
    this.state = (this.state + 0x6d2b79f5) | 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
}
