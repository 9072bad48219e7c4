// Chooses the tier of a request: header hint, then the requested model, then the original's `auto` rules.
import { GatewayError } from "../core/errors.js";

/** Why a request got its tier: `classifier` when the LLM classifier decided what the rules left open. */
export type TierSource =
  | "hint"
  | "model"
  | "auto_session"
  | "auto_tool_followup"
  | "auto_long_prompt"
  | "auto_default"
  | "classifier";

export interface TierDecision {
  tier: string;
  source: TierSource;
}

export interface TierRouterSettings {
  promptLengthThreshold: number;
  toolFollowupStaysSameTier: boolean;
  /** A session bound to an engine keeps that engine's tier under `auto` (rules pick a new session's tier). */
  sessionStaysSameTier: boolean;
  defaultTier: string;
  /** undefined: no long-prompt rule (no big tier). */
  longPromptTier: string | undefined;
}

/** What the router may ask about the deployment; kept narrow so the router stays pure. */
export interface TierCatalog {
  hasTier(tier: string): boolean;
  tierOfModel(model: string): string | undefined;
  /** Every model some tier serves (named in an unknown model's error). */
  models(): string[];
}

/** Served models named in an unknown model's error at most (a long list would drown the message). */
const MODELS_NAMED = 10;

/** "the model 'x' does not exist; served: a, b (or omit model / X-Tier-Hint: auto ...)". */
export function unknownModelMessage(model: string, served: readonly string[]): string {
  const named = served.slice(0, MODELS_NAMED).map((m) => `'${m}'`);
  const more =
    served.length > MODELS_NAMED ? ` and ${served.length - MODELS_NAMED} more (GET /v1/models)` : "";
  return served.length === 0
    ? `the model '${model}' does not exist: no engine serves a model now`
    : `the model '${model}' does not exist; served: ${named.join(", ")}${more}`;
}

export interface TierInputs {
  hint: string | undefined;
  model: string | undefined;
  promptChars: number;
  toolFollowup: boolean;
  /** The tier of the backend the session is bound to, if any. */
  sessionTier: string | undefined;
}

export function chooseTier(
  inputs: TierInputs,
  catalog: TierCatalog,
  settings: TierRouterSettings,
): TierDecision {
  if (inputs.hint !== undefined && inputs.hint !== "auto") {
    if (!catalog.hasTier(inputs.hint)) {
      throw new GatewayError("tier_not_found", `unknown tier '${inputs.hint}' in X-Tier-Hint`, {
        param: "x-tier-hint",
      });
    }
    return { tier: inputs.hint, source: "hint" };
  }
  if (inputs.model !== undefined) {
    const tier = catalog.tierOfModel(inputs.model);
    if (tier === undefined) {
      throw new GatewayError("model_not_found", unknownModelMessage(inputs.model, catalog.models()), {
        param: "model",
      });
    }
    // An explicit model only pins the tier when the hint did not ask for auto routing.
    if (inputs.hint === undefined) return { tier, source: "model" };
  }
  // A bound session keeps its tier: moving it (a prompt grown past the threshold) would lose its whole cache.
  if (
    settings.sessionStaysSameTier &&
    inputs.sessionTier !== undefined &&
    catalog.hasTier(inputs.sessionTier)
  ) {
    return { tier: inputs.sessionTier, source: "auto_session" };
  }
  if (settings.toolFollowupStaysSameTier && inputs.toolFollowup && inputs.sessionTier !== undefined) {
    if (catalog.hasTier(inputs.sessionTier))
      return { tier: inputs.sessionTier, source: "auto_tool_followup" };
  }
  if (settings.longPromptTier !== undefined && inputs.promptChars >= settings.promptLengthThreshold) {
    return { tier: settings.longPromptTier, source: "auto_long_prompt" };
  }
  return { tier: settings.defaultTier, source: "auto_default" };
}

/** Resolves the optional routing keys against the tiers that exist (see the schema's comments). */
export function resolveTierSettings(
  routing: {
    prompt_length_threshold: number;
    tool_followup_stays_same_tier: boolean;
    session_stays_same_tier: boolean;
    default_tier?: string | undefined;
    long_prompt_tier?: string | undefined;
  },
  tiers: readonly string[],
): TierRouterSettings {
  return {
    promptLengthThreshold: routing.prompt_length_threshold,
    toolFollowupStaysSameTier: routing.tool_followup_stays_same_tier,
    sessionStaysSameTier: routing.session_stays_same_tier,
    defaultTier: routing.default_tier ?? (tiers.includes("small") ? "small" : tiers[0]!),
    longPromptTier: routing.long_prompt_tier ?? (tiers.includes("big") ? "big" : undefined),
  };
}
