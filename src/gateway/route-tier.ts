// Stage 3 of a completion: the tier, from the hint, the model or the rules (a tool follow-up asks the binding).
import type { AffinityScheduler } from "../affinity/scheduler.js";
import type { BackendRegistry } from "../backends/registry.js";
import { chooseTier, type TierDecision, type TierRouterSettings } from "../routing/tier-router.js";
import type { ClientHeaders } from "./client-headers.js";
import type { CompletionRequest } from "./completion-request.js";

export function routeTier(
  client: ClientHeaders,
  request: CompletionRequest,
  registry: BackendRegistry,
  scheduler: AffinityScheduler,
  settings: TierRouterSettings,
): TierDecision {
  // Only a tool follow-up needs the session's current tier, so only then is the binding looked up.
  let sessionTier: string | undefined;
  if (request.toolFollowup && client.sessionId !== undefined) {
    const bound = scheduler.boundBackend(client.sessionId);
    sessionTier = bound === undefined ? undefined : registry.get(bound)?.tier;
  }
  return chooseTier(
    {
      hint: client.tierHint,
      model: request.model,
      promptChars: request.promptChars,
      toolFollowup: request.toolFollowup,
      sessionTier,
    },
    registry,
    settings,
  );
}
