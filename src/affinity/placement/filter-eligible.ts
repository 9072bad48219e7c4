// Filter: backends that may take a new placement: up (not draining, not down) and not failed by this request.
import type { Filter } from "./types.js";

export const eligibleFilter: Filter = (request, _state, candidates) =>
  candidates.filter((c) => c.state === "up" && !request.exclude.has(c.id));
