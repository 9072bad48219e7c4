// Builds the live snapshot of one config: its settings, the budgets, the classifier and the attempts' env.
import type { BudgetStore } from "../admission/budget-store.js";
import { TierClassifier } from "../routing/tier-classifier.js";
import type { AttemptEnv } from "./attempt.js";
import type { AttemptLimits } from "./attempt-loop.js";
import { createClassifierAsk, type ClassifierDeps } from "./classifier-client.js";
import type { GatewayParts, LiveState } from "./runtime.js";
import type { GatewaySettings } from "./settings.js";

export type LiveStateDeps = ClassifierDeps &
  Pick<GatewayParts, "pools" | "attempts" | "metrics" | "registry" | "timers">;

export function liveStateFrom(
  settings: GatewaySettings,
  budgets: BudgetStore,
  deps: LiveStateDeps,
): LiveState {
  const attemptEnv = attemptEnvOf(settings, deps);
  return {
    settings,
    budgets,
    attemptEnv,
    classifier: createClassifier(settings, { settings, attemptEnv }, deps),
  };
}

function attemptEnvOf(settings: GatewaySettings, deps: LiveStateDeps): AttemptEnv {
  const { clock, pools, attempts, metrics } = deps;
  return {
    nowMs: () => clock.nowMs(),
    timers: deps.timers,
    firstByteTimeoutMs: settings.firstByteTimeoutMs,
    streamFirstByteTimeoutMs: settings.streamFirstByteTimeoutMs,
    streamHeadersTimeoutMs: settings.streamHeadersTimeoutMs,
    maxResponseBytes: settings.maxResponseBytes,
    streamStallTimeoutMs: settings.streamStallTimeoutMs,
    freshConnection: (backend) => pools.fresh(backend),
    logger: deps.logger,
    track: (backendId, abort) => attempts.track(backendId, abort),
    firstToken: (tier, seconds) => metrics.firstToken(tier, seconds),
  };
}

/** The tier classifier of these settings, or undefined when it is off. */
function createClassifier(
  settings: GatewaySettings,
  limits: AttemptLimits,
  deps: LiveStateDeps,
): TierClassifier | undefined {
  const { classifier } = settings;
  if (!classifier.enabled) return undefined;
  const { defaultTier, longPromptTier } = settings.tiers;
  const choices =
    classifier.tiers ??
    (longPromptTier !== undefined && longPromptTier !== defaultTier
      ? [defaultTier, longPromptTier]
      : deps.registry.tiers());
  return new TierClassifier({
    tiers: choices,
    ask: createClassifierAsk(deps, limits, {
      tier: classifier.tier ?? defaultTier,
      model: classifier.model,
      prompt: classifier.prompt,
    }),
    clock: deps.clock,
    timers: deps.timers,
    timeoutMs: classifier.timeout_ms,
    cacheTtlMs: classifier.cacheTtlMs,
    maxEntries: classifier.max_entries,
    record: (outcome, seconds) => deps.metrics.classifier(outcome, seconds),
  });
}
