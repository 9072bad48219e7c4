// Picker: the highest total score, ties broken at random (the Gateway API Inference Extension's max-score picker).
import type { Random } from "../../core/random.js";
import type { Picker } from "../placement/types.js";

/**
 * The extension shuffles the candidates before taking the best, so equal scores split at random; here one
 * pass of reservoir sampling over the tied best does the same from the injected source.
 */
export function maxScoreRandomTiePicker(random: Random): Picker {
  return (_request, _state, candidates, scores) => {
    let best: (typeof candidates)[number] | undefined;
    let bestScore = -Infinity;
    let ties = 0;
    for (let i = 0; i < candidates.length; i++) {
      const score = scores[i]!;
      if (score > bestScore) {
        best = candidates[i];
        bestScore = score;
        ties = 1;
      } else if (score === bestScore && random.next() * ++ties < 1) {
        best = candidates[i];
      }
    }
    return best;
  };
}
