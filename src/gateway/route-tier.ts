// Stage 3 of a completion: one routing decision (the tier, and the one engine a continued Responses
// conversation must reach) from the hint, the model, the rules, the stored response's owner and the classifier.
import type { BindingLookup } from "../affinity/binding-store.js";
import type { BackendRegistry } from "../backends/registry.js";
import {
  chooseTier,
  type TierDecision,
  type TierRouterSettings,
  type TierSource,
} from "../routing/tier-router.js";
import type { ClientHeaders } from "./client-headers.js";
import { lastTurnText, type CompletionRequest } from "./completion-request.js";
import type { Conversation } from "./response-chain.js";
import type { GatewayParts, LiveState } from "./runtime.js";

export type RouteDeps = Pick<GatewayParts, "registry">;

/** Where a request goes: its tier, why, and the one backend that must answer it (if one must). */
export interface RouteDecision {
  readonly tier: string;
  readonly source: TierSource;
  /** The engine that stores the response a Responses request continues: only it may answer (no failover). */
  readonly onlyBackend: string | undefined;
}

/**
 * Decides where a request goes. Its hint and model are checked whatever decides (an unknown tier or model
 * is refused even when continuing a stored response); then a stored response's owner fixes the tier; else,
 * when the rules left it open, the classifier may choose (bounded by its timeout, never failing). `binding`
 * is the session's binding as this turn looked it up (a bound session keeps its tier). A promise only when
 * the classifier is asked: the common request routes without a microtask of its own.
 */
export function routeRequest(
  deps: RouteDeps,
  live: Pick<LiveState, "settings" | "classifier">,
  client: ClientHeaders,
  sessionId: string | undefined,
  request: CompletionRequest,
  conversation: Conversation,
  binding: BindingLookup,
): RouteDecision | Promise<RouteDecision> {
  const rules = routeTier(client, sessionId, request, deps.registry, binding, live.settings.tiers);
  const { owner } = conversation;
  if (owner !== undefined) return { tier: owner.tier, source: rules.source, onlyBackend: owner.id };
  if (rules.source === "auto_default" && live.classifier !== undefined) {
    return live.classifier
      .classify(lastTurnText(request), rules.tier)
      .then((verdict) =>
        verdict.outcome === "answered" || verdict.outcome === "cached"
          ? { tier: verdict.tier, source: "classifier", onlyBackend: undefined }
          : { tier: rules.tier, source: rules.source, onlyBackend: undefined },
      );
  }
  return { tier: rules.tier, source: rules.source, onlyBackend: undefined };
}

/** The tier by the rules alone: the hint, the model, or the prompt (a bound session keeps its tier). */
export function routeTier(
  client: ClientHeaders,
  sessionId: string | undefined,
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
  if (rulesDecide && asksBinding && sessionId !== undefined) {
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
