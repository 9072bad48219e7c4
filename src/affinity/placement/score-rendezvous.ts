// Scorer: the rendezvous (HRW) draw of each backend for the decision's key, weighted, as a number in (0, 1).
import { pairUniform } from "../hash.js";
import type { Scorer } from "./types.js";

/**
 * u^(1/w), u the pair's uniform draw in (0, 1) (Efraimidis & Spirakis' weighted key). It orders backends
 * exactly as rendezvous.ts's -w/ln(u) does (both are increasing in ln(u)/w), so the highest score is the
 * rendezvous winner and a backend of weight w wins a share w / sum(weights) of keys, but it stays in
 * (0, 1) and so composes with other scorers. Weight 1 gives u itself (Math.pow(u, 1) is exact).
 */
export const rendezvousScorer: Scorer = (_request, state, candidates) =>
  candidates.map((c) => {
    const u = pairUniform(state.key, c.idHash);
    return c.weight === 1 ? u : Math.pow(u, 1 / c.weight);
  });
