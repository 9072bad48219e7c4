// Placement when affinity does not decide (sticky_ttl_seconds 0, or no session id): pluggable balancers.
import type { Random } from "../core/random.js";

export const BALANCER_NAMES = ["least_inflight", "round_robin", "random"] as const;
export type BalancerName = (typeof BALANCER_NAMES)[number];

export interface BalancedCandidate {
  readonly id: string;
  readonly inflight: number;
}

export interface Balancer {
  /** One of the eligible candidates, or undefined when none is eligible. */
  pick<T extends BalancedCandidate>(
    tier: string,
    candidates: readonly T[],
    eligible: (c: T) => boolean,
  ): T | undefined;
}

/**
 * One pass of reservoir sampling over the eligible candidates with the lowest `load`: each of the tied ones
 * ends up chosen with probability 1/ties, from the seeded source.
 */
function pickLowest<T extends BalancedCandidate>(
  candidates: readonly T[],
  eligible: (c: T) => boolean,
  load: (c: T) => number,
  random: Random,
): T | undefined {
  let best: T | undefined;
  let bestLoad = Infinity;
  let ties = 0;
  for (const candidate of candidates) {
    if (!eligible(candidate)) continue;
    const value = load(candidate);
    if (value < bestLoad) {
      best = candidate;
      bestLoad = value;
      ties = 1;
    } else if (value === bestLoad && random.next() * ++ties < 1) {
      best = candidate;
    }
  }
  return best;
}

/** Fewest requests in flight; ties broken by the seeded random source. */
class LeastInflight implements Balancer {
  constructor(private readonly random: Random) {}

  pick<T extends BalancedCandidate>(
    _tier: string,
    candidates: readonly T[],
    eligible: (c: T) => boolean,
  ): T | undefined {
    return pickLowest(candidates, eligible, (c) => c.inflight, this.random);
  }
}

/** Each tier's eligible candidates in turn. */
class RoundRobin implements Balancer {
  private readonly next = new Map<string, number>();

  pick<T extends BalancedCandidate>(
    tier: string,
    candidates: readonly T[],
    eligible: (c: T) => boolean,
  ): T | undefined {
    const start = this.next.get(tier) ?? 0;
    for (let offset = 0; offset < candidates.length; offset++) {
      const index = (start + offset) % candidates.length;
      const candidate = candidates[index]!;
      if (eligible(candidate)) {
        this.next.set(tier, index + 1);
        return candidate;
      }
    }
    return undefined;
  }
}

/** Uniformly among the eligible candidates (every one ties). */
class Uniform implements Balancer {
  constructor(private readonly random: Random) {}

  pick<T extends BalancedCandidate>(
    _tier: string,
    candidates: readonly T[],
    eligible: (c: T) => boolean,
  ): T | undefined {
    return pickLowest(candidates, eligible, () => 0, this.random);
  }
}

export function createBalancer(name: BalancerName, random: Random): Balancer {
  switch (name) {
    case "least_inflight":
      return new LeastInflight(random);
    case "round_robin":
      return new RoundRobin();
    case "random":
      return new Uniform(random);
  }
}
