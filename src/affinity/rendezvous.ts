// Rendezvous (highest-random-weight) hashing: each session ranks backends by a per-pair pseudo-random score.
import { hashString, pairUniform, type Hash64 } from "./hash.js";

export interface RendezvousCandidate {
  readonly id: string;
  /** Relative share of sessions; 1 by default. */
  readonly weight: number;
  /** hashString(id), computed once when the backend is registered. */
  readonly idHash: Hash64;
}

/**
 * Weighted rendezvous score (Schindelhauer & Schomaker's logarithmic method): -weight / ln(u), u uniform in
 * (0, 1). A backend wins a session with probability weight / sum(weights), and adding or removing a backend
 * only moves the sessions it wins or held.
 */
export function rendezvousScore(session: Hash64, candidate: RendezvousCandidate): number {
  return -candidate.weight / Math.log(pairUniform(session, candidate.idHash));
}

export const hashSession: (sessionId: string) => Hash64 = hashString;

/**
 * The highest-scoring candidate that passes `eligible`, or undefined. This is ranking[0] of
 * rendezvousRanking() restricted to eligible candidates, computed in one pass without allocating.
 */
export function rendezvousWinner<T extends RendezvousCandidate>(
  session: Hash64,
  candidates: readonly T[],
  eligible: (candidate: T) => boolean,
): T | undefined {
  // With equal weights, -w/ln(u) orders candidates exactly as u does: skip the logarithm (a third of the cost).
  const sameWeights = candidates.every((c) => c.weight === candidates[0]!.weight);
  let best: T | undefined;
  let bestScore = -Infinity;
  for (const candidate of candidates) {
    if (!eligible(candidate)) continue;
    const score = sameWeights ? pairUniform(session, candidate.idHash) : rendezvousScore(session, candidate);
    // Ties are practically impossible with 53-bit draws; the id order makes them deterministic anyway.
    if (score > bestScore || (score === bestScore && best !== undefined && candidate.id < best.id)) {
      best = candidate;
      bestScore = score;
    }
  }
  return best;
}

/** Every candidate, best first: the order in which failover and bounded-load placement try them. */
export function rendezvousRanking<T extends RendezvousCandidate>(
  session: Hash64,
  candidates: readonly T[],
): T[] {
  return candidates
    .map((candidate) => ({ candidate, score: rendezvousScore(session, candidate) }))
    .sort((a, b) => b.score - a.score || (a.candidate.id < b.candidate.id ? -1 : 1))
    .map((entry) => entry.candidate);
}
