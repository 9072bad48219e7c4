// Stage 3 of a completion: the tier, from the hint, the model or the rules (a bound session keeps its tier).
import type { AffinityScheduler } from "../affinity/scheduler.js";
import type { BackendRegistry } from "../backends/registry.js";
import { chooseTier, type TierDecision, type TierRouterSettings } from "../routing/tier-router.js";
import type { ClientHeaders } from "./client-headers.js";
import type { CompletionRequest } from "./completion-request.js";

export function routeTier(
  client: ClientHeaders & { sessionId: string | undefined },
  request: CompletionRequest,
  registry: BackendRegistry,
  scheduler: AffinityScheduler,
  settings: TierRouterSettings,
): TierDecision {
  // The session's current tier matters only when the rules decide: a hint or an explicit model does not ask.
  let sessionTier: string | undefined;
  const rulesDecide =
    client.tierHint === "auto" || (client.tierHint === undefined && request.model === undefined);
  const asksBinding =
    settings.sessionStaysSameTier || (settings.toolFollowupStaysSameTier && request.toolFollowup);
  if (rulesDecide && asksBinding && client.sessionId !== undefined) {
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
