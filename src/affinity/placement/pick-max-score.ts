// Picker: the highest total score; ties go to the smaller backend id, so a decision never depends on list order.
import type { Picker } from "./types.js";

export const maxScorePicker: Picker = (_request, _state, candidates, scores) => {
  let best = -1;
  for (let i = 0; i < candidates.length; i++) {
    if (
      best < 0 ||
      scores[i]! > scores[best]! ||
      (scores[i] === scores[best] && candidates[i]!.id < candidates[best]!.id)
    )
      best = i;
  }
  return best < 0 ? undefined : candidates[best];
};
