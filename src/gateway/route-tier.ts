// Stage 3 of a completion: the tier, from the hint, the model or the rules (a bound session keeps its tier).
import type { BindingLookup } from "../affinity/binding-store.js";
import type { BackendRegistry } from "../backends/registry.js";
import { chooseTier, type TierDecision, type TierRouterSettings } from "../routing/tier-router.js";
import type { ClientHeaders } from "./client-headers.js";
import type { CompletionRequest } from "./completion-request.js";

export function routeTier(
  client: ClientHeaders & { sessionId: string | undefined },
  request: CompletionRequest,
  registry: BackendRegistry,
  binding: BindingLookup,
  settings: TierRouterSettings,
): TierDecision {
  // The session's current tier matters only when the rules decide: a hint or an explicit model does not ask.
  let sessionTier: string | undefined;
  const rulesDecide =
    client.tierHint === "auto" || (client.tierHint === undefined && request.model === undefined);
  const asksBinding =
    settings.sessionStaysSameTier || (settings.toolFollowupStaysSameTier && request.toolFollowup);
  if (rulesDecide && asksBinding && client.sessionId !== undefined) {
    sessionTier = typeof binding === "string" ? registry.get(binding)?.tier : undefined;
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
