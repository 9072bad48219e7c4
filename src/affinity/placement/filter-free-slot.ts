// Filter: backends that can start the request now (a free slot, nobody queued): where a spill may go.
import { hasFreeSlot } from "./load.js";
import type { Filter } from "./types.js";

export const freeSlotFilter: Filter = (_request, _state, candidates) => candidates.filter(hasFreeSlot);
